"""PyTorch's OpInfo database on the `neuron` device, held to the CPU and to what the policy predicts.

The suite every PyTorch backend is held to (OpenReg, XPU and MPS run it): each OpInfo of
`torch.testing._internal.common_methods_invocations.op_db`, for each dtype of DTYPES the CPU supports, on
its sample inputs, forward, and backward in float32 where the op has a gradient. A sample is first run on
the CPU under the op audit's recorder (`neuronkit.op_audit`), which names the ATen ops the device receives
and classifies them with the same policy the device reads (data/op_verdicts-torch<release>.json, op_support.toml). That
gives the expected outcome, generated rather than kept by hand:

  same      every op native: the device runs it, matches the CPU within the dtype's tolerance, reports no
            fallback;
  fallback  some op has no lowering: it runs, matches, and `get_fallback_ops()` names those ops;
  raise     some op is a gap the device raises for (or a precondition refuses): it raises.

The sample then runs on the device. An outcome other than the expected one is `unexpected`, unless
known_differences.toml lists it (`opinfo` entries, each with its S citation): `known`. Samples the CPU
itself refuses are not counted.

`python -m tests.conformance.opinfo` runs the whole sweep (`make opinfo`) and writes its counts to
opinfo_counts.json, which docs/fidelity.md shows; tests/conformance/test_opinfo.py runs SAMPLED.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
import tomllib
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch
from torch.utils._pytree import tree_flatten, tree_map

from tests.conformance import build_page

HERE = Path(__file__).resolve().parent
COUNTS = HERE / "opinfo_counts.json"
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool)
OUTCOMES = ("same", "fallback", "raise", "known", "unexpected")
# The sampled run in `make test`: one sample per (OpInfo, dtype) for this share of the pairs, chosen by a
# hash of the pair's name (the same pairs every run, spread over all ops and dtypes).
SAMPLED_SHARE = build_page.SAMPLED_SHARE
SAMPLES_PER_PAIR = 8  # the full sweep's cap per (OpInfo, dtype): a few OpInfos generate hundreds


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    """Looser than torch.testing's default for the half types (a decomposed op may round its intermediate
    results in another order); otherwise torch.testing's default for each result's own dtype."""
    return {"rtol": 1.6e-2, "atol": 1e-2} if dtype in (torch.bfloat16, torch.float16) else {}


@dataclass
class Case:
    """One sample of one OpInfo at one dtype, forward or backward."""

    op: Any
    dtype: torch.dtype
    index: int
    sample: Any
    backward: bool = False

    @property
    def name(self) -> str:
        variant = f".{self.op.variant_test_name}" if self.op.variant_test_name else ""
        return f"{self.op.name}{variant}"

    @property
    def label(self) -> str:
        return f"{self.name} {str(self.dtype).removeprefix('torch.')} #{self.index}" + (" backward" * self.backward)


@dataclass
class Result:
    case: Case
    expected: str
    outcome: str
    detail: str = ""


@dataclass
class Tally:
    """Counts per outcome, and the unexpected results with what happened."""

    counts: Counter = field(default_factory=Counter)
    unexpected: list[Result] = field(default_factory=list)
    known: Counter = field(default_factory=Counter)

    def add(self, result: Result) -> None:
        self.counts[result.outcome] += 1
        if result.outcome == "unexpected":
            self.unexpected.append(result)
        elif result.outcome == "known":
            self.known[result.detail] += 1


# ---------------------------------------------------------------------------------------------------
# The known differences an OpInfo sample may show (known_differences.toml, entries with `opinfo`).


@dataclass(frozen=True)
class Known:
    ops: frozenset[str]  # OpInfo names (with variant), "*" for any
    dtypes: frozenset[str]  # dtype names, empty for any
    outcomes: frozenset[str]  # what the device does instead: mismatch, raise, fallback, runs
    what: str

    detail: str  # text the outcome's detail must contain ("" for any)
    label: str  # a few words naming it in the counts

    def covers(self, case: Case, outcome: str, detail: str) -> bool:
        return (("*" in self.ops or case.name in self.ops or case.op.name in self.ops)
                and (not self.dtypes or str(case.dtype).removeprefix("torch.") in self.dtypes)
                and outcome in self.outcomes and self.detail in detail)


def known_differences() -> list[Known]:
    with (HERE / "known_differences.toml").open("rb") as fh:
        entries = tomllib.load(fh)["difference"]
    return [Known(frozenset(d["opinfo"]), frozenset(d.get("opinfo_dtypes", ())), frozenset(d["opinfo_outcomes"]),
                  d["what"], d.get("opinfo_detail", ""), d["opinfo_label"]) for d in entries if "opinfo" in d]


# ---------------------------------------------------------------------------------------------------
# Cases.


def opinfo_module() -> Any:
    """torch.testing._internal.common_methods_invocations (a few seconds to import), without the side effects
    its common_utils has on the process, which would reach every later test of a pytest worker: it freezes
    torch.backends' flags (the op audit sets mkldnn's), sets TORCHINDUCTOR_CACHE_DIR and adds a warnings filter."""
    import os

    frozen, environ, filters = torch.backends.flags_frozen(), dict(os.environ), list(warnings.filters)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch.testing._internal.common_methods_invocations as module
    if not frozen:  # torch.backends is a wrapper module: the flag lives in its functions' globals
        torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True
    for name in set(os.environ) - set(environ):
        del os.environ[name]
    warnings.filters[:] = filters
    _without_source_lookups()
    return module


def _extract_test_fn() -> Any:
    """torch.testing's extract_test_fn (common_utils), walking the frames themselves: the same frames, checks and
    result, without the source line `inspect.stack()` looks up for each of them (every lookup scans sys.modules,
    which a pytest worker that imported transformers fills: ~60 ms a call, two calls per `op.sample_inputs`,
    more than half the sampled sweep's time). Outside a unittest.TestCase, as here, it finds nothing."""
    import unittest

    try:
        frame = sys._getframe(1)
        while frame is not None:
            self_val = frame.f_locals.get("self")
            if isinstance(self_val, unittest.TestCase):
                test_id = self_val.id()
                *_, cls_name, test_name = test_id.rsplit(".", 2)
                if cls_name == type(self_val).__name__ and test_name.startswith("test"):
                    return getattr(self_val, test_name).__func__
            frame = frame.f_back
    except Exception:
        pass
    return None


def _without_source_lookups() -> None:
    """_extract_test_fn in place of torch.testing's, where sample_inputs and TrackedInputIter call it."""
    import torch.testing._internal.common_utils as common_utils
    import torch.testing._internal.opinfo.core as opinfo_core

    for module in (common_utils, opinfo_core):
        module.extract_test_fn = _extract_test_fn


def op_db() -> list[Any]:
    """PyTorch's OpInfo database."""
    return opinfo_module().op_db


def _chosen(name: str, dtype: torch.dtype, share: float) -> bool:
    digest = hashlib.sha256(f"{name}/{dtype}".encode()).digest()
    return int.from_bytes(digest[:4], "big") < share * 2**32


def cases(ops: list[Any], *, share: float = 1.0, per_pair: int = SAMPLES_PER_PAIR) -> Iterator[Case]:
    """Every (OpInfo, dtype) pair the CPU supports, or the `share` of them chosen by hash; up to `per_pair`
    samples of each, forward, then backward in float32 where the OpInfo has a gradient."""
    for op in ops:
        supported = op.supported_dtypes("cpu")
        for dtype in DTYPES:
            probe = Case(op, dtype, 0, None)
            if dtype not in supported or (share < 1.0 and not _chosen(probe.name, dtype, share)):
                continue
            grad = dtype is torch.float32 and op.supports_autograd
            try:
                samples = list(_first(op.sample_inputs("cpu", dtype, requires_grad=grad), per_pair))
            except Exception:  # an OpInfo whose sample generator needs what this build lacks (scipy, ...)
                continue
            for index, sample in enumerate(samples):
                yield Case(op, dtype, index, sample)
                if grad:
                    yield Case(op, dtype, index, sample, backward=True)


def _first(iterable: Any, n: int) -> Iterator[Any]:
    for i, item in enumerate(iterable):
        if i >= n:
            return
        yield item


# ---------------------------------------------------------------------------------------------------
# Running one case.


# OpInfos whose sample the move to the device changes (cases skipped): a view's storage offset into a larger
# storage does not survive the copy (as_strided's partial views read memory outside the view).
_UNMOVABLE = frozenset({"as_strided.partial_views"})
# OpInfos with a tensor argument that must stay on the host (their other tensors move).
_HOST_ARGUMENTS = frozenset({"tensor_split"})


def _on(device: str, value: Any) -> Any:
    """A device argument (a factory's `device=`, `to`'s target) naming the host, made to name `device`."""
    if (isinstance(value, torch.device) and value.type == "cpu") or (isinstance(value, str) and value == "cpu"):
        return torch.device(device)
    return value


def _call(case: Case, device: str) -> Any:
    """The op on the sample moved to `device`; backward: the gradients of the sum of its floating outputs
    with respect to the sample's inputs that require grad."""
    if case.name in _UNMOVABLE:
        raise _NotComparable

    def move(t: Any) -> Any:
        return t.detach().to(device).requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t

    if case.name in _HOST_ARGUMENTS:
        sample = case.sample
        inputs, args = move(sample.input), sample.args
    else:
        sample = case.sample.transform(move)
        inputs, args = sample.input, sample.args
    args = tuple(_on(device, a) for a in args)
    kwargs = {k: _on(device, v) for k, v in sample.kwargs.items()}
    out = case.op(inputs, *args, **kwargs)
    if not case.backward:
        return out
    inputs = [t for t in tree_flatten((inputs, args, kwargs))[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    if not inputs or not outputs:
        raise _NotComparable
    total = sum(o.sum() for o in outputs)
    return torch.autograd.grad(total, inputs, allow_unused=True)


class _NotComparable(Exception):
    """The case has nothing to compare: no differentiable output for a backward, or a sample the move to the
    device would change."""


def _predict(case: Case) -> tuple[str, set[str], Any]:
    """(expected outcome, the fallback ops the device should name or the categories its error should, the
    CPU result), from the op audit's recording of the CPU run; the CPU's own exception propagates."""
    from neuronkit.op_audit.classify import classify
    from neuronkit.op_audit.recorder import OpRecorder
    from neuronkit.policy import load_policy

    torch.manual_seed(0)
    with OpRecorder() as recorder:
        result = _call(case, "cpu")
    rows, findings, _ = classify(recorder.ops)
    if any(r.classification == "blocked" for r in rows):
        return "raise", {f.category for f in findings if f.severity == "blocker"}, result
    # Whitelisted views S's fallback runs unlogged (`view_as_complex`) are not reported.
    fallbacks = {r.op for r in rows if r.classification == "cpu_fallback" and not load_policy().rule(r.op).is_view}
    return ("fallback" if fallbacks else "same"), fallbacks, result


def _names(error: Exception, categories: set[str]) -> bool:
    """Whether the device's error is the refusal the policy predicts: a category it tags (`[sparse]`), or a
    precondition's refusal of that category (S's own exception, `preconditions.refusal`)."""
    from neuronkit.preconditions import refusal

    found = refusal(error)
    return (found is not None and found[1] in categories) or any(f"[{c}]" in str(error) for c in categories)


def _op_name(qualified: str) -> str:
    """`aten::argmax.out` -> `aten::argmax`: the device's fallback names a structured op by the `.out` overload
    its composite calls, the recording by the one the model called."""
    return qualified.split(".", 1)[0]


def _metadata(result: Any) -> Any:
    """The result with its tensors reduced to (shape, dtype)."""
    return tree_map(lambda t: (tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else t, result)


def _host(result: Any) -> Any:
    """The device's result on the host (moving it is part of the run: it may raise)."""
    return tree_map(lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t, result)


def _matches(moved: Any, cpu_result: Any, dtype: torch.dtype) -> str:
    """"" when the device's result (on the host) equals the CPU's within the tolerance, else what differs. A
    float64 result is held to float32's tolerance: the device computes it in float32 (policy [dtypes])."""
    expected = tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, cpu_result)
    tolerance = _tolerance(dtype)
    if not tolerance and any(isinstance(t, torch.Tensor) and t.dtype is torch.float64 for t in tree_flatten(expected)[0]):
        tolerance = {"rtol": 1.3e-6, "atol": 1e-5}
    try:
        torch.testing.assert_close(moved, expected, equal_nan=True, check_device=False, **tolerance)
    except (AssertionError, TypeError, ValueError, RuntimeError) as exc:
        return " ".join(str(exc).split())[:300]
    return ""


def run_case(case: Case, known: list[Known]) -> Result | None:
    """The case's result; None when the CPU refuses the sample (or it has no backward)."""
    import torch_neuronx

    try:
        expected, fallbacks, cpu_result = _predict(case)  # `fallbacks`: the categories, for an expected raise
    except Exception:
        return None
    random = _values_undefined(case)
    torch_neuronx.clear_op_tracking()
    torch.manual_seed(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            device_result = _host(_call(case, "neuron"))
    except _NotComparable:
        return None
    except Exception as exc:
        outcome, detail = "raise", f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        if expected == "raise" and _names(exc, fallbacks):
            return Result(case, expected, outcome)
    else:
        if random:
            same = _metadata(device_result) == _metadata(cpu_result)
            mismatch = "" if same else f"shapes or dtypes differ: {_metadata(device_result)} {_metadata(cpu_result)}"
        else:
            mismatch = _matches(device_result, cpu_result, case.dtype)
        seen = set(torch_neuronx.get_fallback_ops())
        fallbacks = set() if expected == "raise" else fallbacks  # for a raise: the categories, not ops
        extra = {op for op in seen if _op_name(op) not in {_op_name(f) for f in fallbacks}}
        if mismatch:
            outcome, detail = "mismatch", mismatch
        elif extra:
            outcome, detail = "fallback", f"fell back: {sorted(extra)}"
        elif fallbacks and not seen:
            outcome, detail = "runs", f"predicted fallbacks {sorted(fallbacks)}, none recorded"
        else:
            outcome, detail = ("fallback" if seen else "same"), ""
    if outcome == expected and outcome != "raise" and (expected != "fallback" or not detail):
        return Result(case, expected, outcome)
    for entry in known:
        if entry.covers(case, outcome, detail):
            return Result(case, expected, "known", entry.label)
    return Result(case, expected, "unexpected", f"{outcome}: {detail}" if detail else outcome)


_UNDEFINED_VALUES = re.compile(r"(^|\.)(rand\w*|bernoulli|normal|uniform|exponential|geometric|cauchy|log_normal|"
                               r"multinomial|poisson|(alpha_|feature_alpha_)?dropout(\dd)?|new_empty\w*|empty\w*)$")


def _values_undefined(case: Case) -> bool:
    """Whether the OpInfo's values say nothing (random draws, uninitialised memory): its results are compared
    by shape and dtype only."""
    return bool(_UNDEFINED_VALUES.search(case.op.name))


def sweep(share: float = 1.0, per_pair: int = SAMPLES_PER_PAIR, ops: list[Any] | None = None,
          progress: bool = False, trace: bool = False, only: set[str] | None = None) -> Tally:
    """Run the cases and count their outcomes."""
    known = known_differences()
    tally = Tally()
    start = time.monotonic()
    for n, case in enumerate(cases(ops if ops is not None else op_db(), share=share, per_pair=per_pair)):
        if only is not None and case.label not in only:
            continue
        if trace:
            print(case.label, file=sys.stderr, flush=True)
        result = run_case(case, known)
        if result is not None:
            tally.add(result)
        if progress and n % 2000 == 0:
            print(f"{n} cases, {time.monotonic() - start:.0f} s: {dict(tally.counts)}", file=sys.stderr)
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="PyTorch's OpInfo suite on the neuron device (the full sweep)")
    parser.add_argument("--share", type=float, default=1.0, help="the share of (OpInfo, dtype) pairs to run")
    parser.add_argument("--per-pair", type=int, default=SAMPLES_PER_PAIR, help="samples per (OpInfo, dtype)")
    parser.add_argument("--out", type=Path, default=COUNTS, help="where to write the counts (JSON)")
    parser.add_argument("--trace", action="store_true", help="print each case before it runs (to find a crash)")
    parser.add_argument("--cases", type=Path, default=None,
                        help="run only the cases labelled in this file (one `UNEXPECTED <label>:` line or label each)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    only = None
    if args.cases is not None:
        only = {line.removeprefix("UNEXPECTED ").split(":", 1)[0].strip()
                for line in args.cases.read_text().splitlines() if line.strip()}
    tally = sweep(args.share, args.per_pair, progress=True, trace=args.trace, only=only)
    counts = {"samples": sum(tally.counts.values()), **{k: tally.counts.get(k, 0) for k in OUTCOMES},
              "known_by_difference": dict(sorted(tally.known.items())),
              "share": args.share, "per_pair": args.per_pair, "torch": torch.__version__.split("+", 1)[0],
              "seconds": round(time.monotonic() - start)}
    args.out.write_text(json.dumps(counts, indent=1) + "\n")
    for result in tally.unexpected:
        print(f"UNEXPECTED {result.case.label}: expected {result.expected}, {result.detail}")
    print(f"wrote {args.out}: {counts['samples']} samples, {counts['unexpected']} unexpected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
