"""The op-support policy of the `neuron` device, read from the package's `data/op_verdicts-torch<release>.json`
for the running torch (each ATen overload's verdict, generated from the real backend's source and that torch's
own op set by data/build_op_table.py) and
`data/op_support.toml` (the hand-kept rules: documented gaps, findings, preconditions, dtypes, autocast).

One classifier serves the simulated device's kernel, the op audit and the compile backend, so all three
always agree on what runs natively, what falls back to CPU and what the first release does not support.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from neuronkit.errors import NeuronkitInputError
from neuronkit.resources import data_dir

Severity = Literal["ok", "info", "warn", "blocker"]
# Severities, most severe first: the one order findings and op rows are sorted and ranked in.
SEVERITIES: tuple[str, ...] = ("blocker", "warn", "info", "ok")
FINDING_SEVERITIES: tuple[str, ...] = SEVERITIES[:-1]  # a finding is never `ok`

NATIVE = "native"
CPU_FALLBACK = "cpu_fallback"
FLOAT64_EMULATED = "float64_emulated"
INT64_EMULATED = "int64_emulated"
COMPLEX_DTYPE = "complex_dtype"
INPUT_FALLBACK = "input_fallback"
HOST_SYNC, HOST_ROUND_TRIP = "host_sync", "host_round_trip"  # op_support.toml [[host_transfer]] categories


RUNTIMES = ("raise", "cpu_fallback", "decompose", "run")
# From torch 2.13 `torch.library.Library.impl` overrides an earlier Python kernel of the same op and key
# (PyTorch PR #182293, allow_override=True: torch 2.13 torch/library.py:438,474); before, the second
# registration raised, and S swallowed the error (torch_mlir/operation_registry.py:136-146).
LATER_REGISTRATION_WINS_FROM = (2, 13)
# An overload's verdict in data/op_verdicts-torch<release>.json, the device's own registrations first.
VERDICTS = ("native", "view", "composite", "cpu_fallback")
# The torch releases TorchNeuron's public beta ships for (torch-neuronx 2.13.x and 2.14.x; pyproject's
# `torch>=2.13,<2.15`), each with its op table: every release adds and drops ATen overloads (2.14 adds
# `_philox_key_fold_in.Tensor`, drops `cholesky`), so one table cannot name every overload of both.
TORCH_RELEASES = ("2.13", "2.14")


@dataclass(frozen=True, slots=True)
class Rule:
    """How the device treats one ATen op (by base name, e.g. ``add`` for ``aten::add.Tensor``)."""

    name: str
    category: str  # stable id: native, cpu_fallback, sparse, dynamic_shape, ...
    is_view: bool = False  # compiles no NEFF, never reported as a fallback
    blocked: bool = False  # the device raises NotImplementedError for it
    feature: str = ""
    remedy: str = ""
    documented: str = ""  # where the first release documents it as unsupported ("" if not a documented gap)
    runtime: str = ""  # what the device does at run time: raise, cpu_fallback, decompose, run
    source: str = ""  # where that behaviour comes from (a path in the source snapshot, a docs section)

    @property
    def native(self) -> bool:
        """True when the op has a native Neuron lowering."""
        return self.category == NATIVE


@dataclass(frozen=True, slots=True)
class _Feature:
    category: str
    feature: str
    remedy: str
    ops: frozenset[str]
    prefixes: tuple[str, ...]
    documented: str
    runtime: str
    source: str
    call_rule: str

    def matches(self, name: str) -> bool:
        return name in self.ops or name.startswith(self.prefixes)

    def rule(self, name: str) -> Rule:
        return Rule(name, self.category, blocked=self.runtime == "raise", feature=self.feature,
                    remedy=self.remedy, documented=self.documented, runtime=self.runtime, source=self.source)


@dataclass(frozen=True, slots=True)
class Precondition:
    """An input check of a registered op (`[[precondition]]`): `check` names a predicate in
    `neuronkit.preconditions`; a call it refuses is `category`, one it cannot judge without tensor values
    is `unknown_category`, and one no implementation takes is an input-dependent CPU fallback."""

    op: str
    check: str
    category: str
    unknown_category: str
    feature: str
    remedy: str
    source: str
    kernel: str = ""  # the one of S's kernels it belongs to ("xla"): it applies only where that kernel wins


def _feature(entry: dict, gap: bool) -> _Feature:
    runtime = entry.get("runtime", "")
    if runtime not in RUNTIMES + ("",):
        raise ValueError(f"op_support.toml: {entry['category']}: runtime {runtime!r} is not one of {RUNTIMES}")
    return _Feature(entry["category"], entry["feature"], entry["remedy"], frozenset(entry.get("ops", [])),
                    tuple(entry.get("prefixes", [])), entry.get("documented", "") if gap else "", runtime,
                    entry.get("runtime_source" if gap else "source", ""), entry.get("call_rule", ""))


class Policy:
    """Classifies ATen ops and dtypes against the support table."""

    def __init__(self, table: dict, verdicts: dict, torch_version: str = torch.__version__) -> None:
        self.meta: dict = table.get("meta", {})
        # Which of S's two Python registrations of an overload wins under this torch (`registrations` in
        # the op table): the first up to torch 2.12, the later (torch-mlir) one from 2.13.
        self.winner = "later" if later_registration_wins(torch_version) else "first"
        self.verdict_meta: dict = verdicts["meta"]
        # Every ATen overload (`aten::add.Tensor`, `aten::clone` for a default one): {verdict, source, ...}.
        self.overloads: dict[str, dict] = verdicts["overloads"]
        self.unattached: dict[str, str] = verdicts.get("unattached", {})
        # A bare name's verdict (`aten::masked_fill`, no such overload): its overloads' best one.
        self._base_verdicts: dict[str, str] = {}
        for qualified, row in self.overloads.items():
            base = qualified.split(".", 1)[0]
            best = self._base_verdicts.get(base)
            if best is None or VERDICTS.index(row["verdict"]) < VERDICTS.index(best):
                self._base_verdicts[base] = row["verdict"]
        self.view_ops = frozenset(table["views"]["ops"])
        self.sources: dict[str, str] = {k: table[k]["source"] for k in ("views", "dtypes")}
        features = [_feature(f, gap=True) for f in table.get("gap", [])]
        features += [_feature(f, gap=False) for f in table.get("finding", [])]
        self._features = tuple(f for f in features if not f.call_rule)
        self._call_features = tuple(f for f in features if f.call_rule)
        self.severity: dict[str, Severity] = dict(table["categories"])
        dtypes = table["dtypes"]
        self.emulated_dtypes: dict[torch.dtype, torch.dtype] = {
            getattr(torch, wide): getattr(torch, narrow)
            for wide, narrow in dtypes.items() if wide in ("float64", "int64")
        }
        preconditions = [Precondition(p["op"], p["check"], p["category"], p["unknown_category"], p["feature"],
                                      p["remedy"], p["source"], p.get("kernel", "")) for p in table.get("precondition", [])]
        # Those of a kernel another registration overrides under this torch do not apply.
        self.preconditions: dict[str, tuple[Precondition, ...]] = {}
        for p in preconditions:
            if p.kernel and self.winning_kernel(p.op) != p.kernel:
                continue
            self.preconditions[p.op] = self.preconditions.get(p.op, ()) + (p,)
        self.complex_dtypes = frozenset(getattr(torch, d) for d in dtypes["complex"])
        self.complex_remedy: str = dtypes["complex_remedy"]
        self.emulated_remedy: str = dtypes["emulated_remedy"]
        self.autocast: dict = table["autocast"]
        self.remedies: dict[str, str] = {f.category: f.remedy for f in features}
        self.remedies[CPU_FALLBACK] = (
            "Runs on the host: each call copies its inputs to CPU and its outputs back. Acceptable off the "
            "hot path; on it, rewrite with natively supported ops or ask for a lowering.")
        self.remedies[COMPLEX_DTYPE] = self.complex_remedy
        self.remedies[INPUT_FALLBACK] = (
            "These inputs are ones no device implementation of the op takes, so it runs on the host (an "
            "input-dependent fallback; TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 makes it an error): "
            "change the inputs to a form the op's note names.")
        for p in preconditions:
            self.remedies[p.category] = self.remedies[p.unknown_category] = p.remedy
        self.remedies[FLOAT64_EMULATED] = self.remedies[INT64_EMULATED] = self.emulated_remedy
        self.features: dict[str, str] = {f.category: f.feature for f in features}
        self.features[INPUT_FALLBACK] = "inputs no device implementation of a registered op takes"
        for p in preconditions:
            self.features[p.category] = p.feature
            self.features[p.unknown_category] = p.feature + " (not decidable from shapes alone: checked on the device)"
        # Host work inside native ops ([[host_transfer]]), by base name or `name.overload`: its category.
        self.host_transfers: dict[str, str] = {}
        for entry in table.get("host_transfer", []):
            self.host_transfers.update(dict.fromkeys(entry["ops"], entry["category"]))
            self.features[entry["category"]], self.remedies[entry["category"]] = entry["feature"], entry["remedy"]
        # Documented gaps by category: where each is documented and what the device does at run time.
        self.gaps: dict[str, Rule] = {f.category: f.rule(f.category) for f in features if f.documented}

    @property
    def categories(self) -> list[str]:
        """Every stable category id, in table order."""
        return list(self.severity)

    def verdict(self, name: str) -> str:
        """The overload's verdict from the op table (`aten::add.Tensor`, `aten.add.Tensor`,
        `add.Tensor`; a bare `add` is the default overload). A name with no such overload gets the best
        verdict of its overloads; an op the table does not know takes the CPU fallback."""
        qualified = qualified_name(name)
        row = self.overloads.get(qualified)
        if row is not None:
            return row["verdict"]
        return self._base_verdicts.get(qualified.split(".", 1)[0], "cpu_fallback")

    def static_scalars(self, name: str) -> tuple[str, ...]:
        """The Scalar arguments S keys the overload's NEFF by value (its torch-mlir registration's static
        arguments, the op table's `static`); every other Python number is a 0-d input of the NEFF."""
        row = self.overloads.get(qualified_name(name), {})
        registrations = row.get("registrations")
        if registrations is not None:
            return tuple(registrations[self.winner]["static"])
        return tuple(row.get("static", ()))

    def host_transfer(self, name: str) -> str | None:
        """`host_sync` or `host_round_trip` when the native op does host work on every call, else None."""
        qualified = qualified_name(name)
        found = self.host_transfers.get(qualified.removeprefix("aten::")) or self.host_transfers.get(base_name(name))
        return found if found is not None and self.runs_natively(name) else None

    def winning_kernel(self, name: str) -> str | None:
        """Which of S's kernels serves an overload S registers twice in Python under this torch (`xla`,
        `torch-mlir`, `common`), None for one registered once (or not at all)."""
        qualified = qualified_name(name)
        rows = [self.overloads[qualified]] if qualified in self.overloads else [
            row for key, row in self.overloads.items() if key.split(".", 1)[0] == qualified]  # a base name: any
        registrations = next((row["registrations"] for row in rows if "registrations" in row), None)
        return registrations[self.winner]["kernel"] if registrations else None

    @functools.lru_cache(maxsize=None)
    def rule(self, name: str) -> Rule:
        """The rule for an ATen overload (see `verdict` for the names taken); the hand-kept rules of
        op_support.toml match its base name or `name.overload` and come first."""
        base = base_name(name)
        overload = qualified_name(name).removeprefix("aten::")
        for feature in self._features:
            if feature.matches(base) or feature.matches(overload):
                rule = feature.rule(base)
                return dataclasses.replace(rule, is_view=True) if base in self.view_ops else rule
        row = self.overloads.get(qualified_name(name), {})
        verdict = self.verdict(name)
        if base in self.view_ops and verdict in ("composite", "cpu_fallback"):
            # Hand-kept: the simulator moves and allocates through these (e.g. upstream's copy_ composite
            # calls _copy_from, where S registers copy_ itself); they compile nothing and are never fallbacks.
            return Rule(base, NATIVE, is_view=True, source=self.sources["views"])
        where = f"data/{verdicts_path(self.verdict_meta['torch']).name} from S @ {self.verdict_meta['commit'][:7]}"
        source = f"{row['source']} ({where})" if row else f"the best verdict of the overloads of {base} ({where})"
        if verdict == "composite":
            return Rule(base, NATIVE, runtime="decompose", source=source)
        if verdict in ("native", "view"):
            return Rule(base, NATIVE, is_view=verdict == "view" or base in self.view_ops, source=source)
        # `silent`: S's fallback runs it on the host without logging it (a whitelisted view).
        return Rule(base, CPU_FALLBACK, is_view=bool(row.get("silent")), feature="no native Neuron lowering",
                    remedy=self.remedies[CPU_FALLBACK], source=source)

    @functools.lru_cache(maxsize=None)
    def call_rules(self, name: str) -> tuple[tuple[str, Rule], ...]:
        """The input-aware rules of an op: (rule name in `neuronkit.call_rules`, the Rule that
        applies when that function flags a call). Empty for almost every op."""
        name = base_name(name)
        return tuple((f.call_rule, f.rule(name)) for f in self._call_features if f.matches(name))

    def runs_natively(self, name: str) -> bool:
        """Whether the op has a native lowering (including a finding such as ``nonzero``), is
        metadata-only, or is a documented gap that runs or decomposes on the device."""
        verdict = self.verdict(name)
        if verdict in ("native", "view") or base_name(name) in self.view_ops:
            return True
        rule = self.rule(name)
        # A composite a finding names without saying what the device does (`argwhere`, a dynamic_shape op)
        # decomposes as any composite does: its parts decide.
        return rule.runtime == "decompose" or (rule.runtime == "run" and bool(rule.documented)) or (
            verdict == "composite" and not rule.runtime and not rule.documented)

    def dtype_category(self, dtype: torch.dtype) -> str | None:
        """`float64_emulated`, `int64_emulated`, `complex_dtype`, or None for a native dtype."""
        if dtype in self.complex_dtypes:
            return COMPLEX_DTYPE
        if dtype is torch.float64:
            return FLOAT64_EMULATED
        if dtype is torch.int64:
            return INT64_EMULATED
        return None


def torch_at_least(version: str, minimum: tuple[int, int]) -> bool:
    """Whether torch `version` ("2.13.0", "2.14.1+cpu") is `minimum` (major, minor) or newer."""
    parts = version.split("+", 1)[0].split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= minimum
    except (IndexError, ValueError):
        return True  # an unparsable development build: the newest rules


def later_registration_wins(version: str) -> bool:
    """Whether a later Python registration of an op overrides an earlier one under torch `version`."""
    return torch_at_least(version, LATER_REGISTRATION_WINS_FROM)


def qualified_name(name: str) -> str:
    """`aten.add.Tensor` / `add.Tensor` / `aten::add.default` -> `aten::add.Tensor` / `aten::add`."""
    if name.startswith(("aten::", "aten.")):
        name = name[5:].lstrip(":.")
    name = name.removesuffix(".default")
    return f"aten::{name}"


def base_name(name: str) -> str:
    """`aten::add.Tensor` / `aten.add.Tensor` / `add.Tensor` -> `add`."""
    return qualified_name(name).removeprefix("aten::").split(".", 1)[0]


def overload(qualified: str) -> torch._ops.OpOverload:
    """The ATen OpOverload a dispatcher name (`aten::add.Tensor`, `aten::clone`) names."""
    name, _, overload_name = qualified.removeprefix("aten::").partition(".")
    return getattr(getattr(torch.ops.aten, name), overload_name or "default")


def returns_view(qualified: str) -> bool:
    """Whether an overload returns an alias of an input that it does not write (a view)."""
    return any(r.alias_info is not None and not r.alias_info.is_write for r in overload(qualified)._schema.returns)


def torch_release(version: str = torch.__version__) -> str:
    """The release ("2.14") of torch `version` ("2.14.1+cu130")."""
    return ".".join(version.split("+", 1)[0].split(".")[:2])


def verdicts_path(version: str = torch.__version__) -> Path:
    """The op table of torch `version`'s release: `data/op_verdicts-torch2.14.json` for torch 2.14.1. Each
    is generated from S and that release's own ATen overloads (data/build_op_table.py)."""
    return data_dir() / f"op_verdicts-torch{torch_release(version)}.json"


@functools.lru_cache(maxsize=2)
def load_policy(torch_version: str = torch.__version__) -> Policy:
    """The policy from `data/op_support.toml` and the running torch's op table, parsed once per process; for
    another torch than the running one (which registration of S wins), `torch_version`. The table is always
    the running torch's: its rows are that torch's overloads, the ones its dispatcher can reach."""
    path = data_dir() / "op_support.toml"
    try:
        with path.open("rb") as fh:
            table = tomllib.load(fh)
        path = verdicts_path()
        with path.open("rb") as fh:
            return Policy(table, json.load(fh), torch_version)
    except FileNotFoundError:
        if path.name.startswith("op_verdicts") and torch_release() not in TORCH_RELEASES:
            raise FileNotFoundError(
                f"neuronkit has no op table for torch {torch.__version__}: it supports torch "
                f"{' and '.join(TORCH_RELEASES)} (the releases TorchNeuron's public beta ships for); "
                f"install one of them") from None
        raise FileNotFoundError(
            f"neuronkit's op-support table is missing: {path}. Reinstall neuronkit."
        ) from None


def fail_on_categories(text: str) -> list[str]:
    """A `--fail-on` list (comma-separated), each name checked against the policy's stable category ids;
    an unknown name is bad input."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    known = load_policy().categories
    unknown = [name for name in names if name not in known]
    if unknown:
        raise NeuronkitInputError(
            f"unknown --fail-on categor{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}; "
            f"known: {', '.join(known)}")
    return names
