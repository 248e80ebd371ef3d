"""AWS's compatibility-table vocabulary, and the one rule that classifies a public API in it from the ATen ops
it runs.

The public beta's table ("Supported PyTorch APIs and operators", Neuron 2.33; `docs/torch_api_compatibility.md`
in aws-neuron/torch-neuronx; the vocabulary and this rule: docs/compat-table.md) marks each public API:
  Y             Native (runs on the device), Host-only (Python on the host, no tensor computation), or
                Needs a process group (requires `torch.distributed.init_process_group` first);
  CPU_FALLBACK  the named ATen operator runs on the CPU, with the dtypes affected where coverage differs;
  N             not supported.
neuronkit adds `unknown`, with its reason, where the policy cannot settle the class: it never guesses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["Y", "CPU_FALLBACK", "N", "unknown"]
STATUSES: tuple[Status, ...] = ("Y", "CPU_FALLBACK", "N", "unknown")
NATIVE, HOST_ONLY, PROCESS_GROUP = "Native", "Host-only", "Needs a process group"
ALL_DTYPES = "all dtypes"

# What one ATen op is, for this vocabulary: native (a device kernel, a view, an NKI kernel), fallback (runs
# on the CPU), blocked (the device raises or the first release does not support it), collective (a process
# group op), unknown (no verdict).
OpKind = Literal["native", "fallback", "blocked", "collective", "unknown"]


@dataclass(frozen=True, slots=True)
class OpFact:
    """One ATen op as the policy (or the audit's classification of a recorded call) sees it. `host_value`:
    its result is a host value, not a tensor (`_local_scalar_dense`, what `.item()` runs); `note`: the
    policy's feature or finding for it (a blocker's reason, a finding to plan for)."""

    op: str
    kind: OpKind
    dtypes: tuple[str, ...] = ()
    note: str = ""
    host_value: bool = False


@dataclass(frozen=True, slots=True)
class Verdict:
    """A public API's class: `status` and the table's limitations column (`how`), the ATen ops that decide
    it and, for a CPU fallback, the dtypes affected."""

    status: Status
    how: str
    aten_ops: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()


def classify(facts: list[OpFact]) -> Verdict:
    """The class of an API from the ATen ops it runs: any blocked op makes it N; else any op on the CPU makes
    it CPU_FALLBACK (naming those ops and their dtypes); else a collective needs a process group; else it is
    Y, Native when a device op computes its result and Host-only when no ATen op runs or its only results are
    host values. An op with no verdict leaves it unknown, naming the op."""
    if not facts:
        return Verdict("Y", HOST_ONLY + " (runs no ATen op)")
    for kind, status in (("blocked", "N"), ("fallback", "CPU_FALLBACK")):
        picked = [f for f in facts if f.kind == kind]
        if picked:
            dtypes = tuple(sorted({d for f in picked for d in f.dtypes})) or (ALL_DTYPES,)
            how = "; ".join(dict.fromkeys(f"{f.op}: {f.note}" if f.note else f.op for f in picked))
            return Verdict(status, how, _ops(picked), dtypes if status == "CPU_FALLBACK" else ())
    unknown = [f for f in facts if f.kind == "unknown"]
    if unknown:
        return Verdict("unknown", "; ".join(dict.fromkeys(f.note for f in unknown)), _ops(unknown))
    notes = "; ".join(dict.fromkeys(f"{f.op}: {f.note}" for f in facts if f.note))
    collectives = [f for f in facts if f.kind == "collective"]
    if collectives:
        return Verdict("Y", _with(PROCESS_GROUP, notes), _ops(collectives))
    if all(f.host_value for f in facts):
        return Verdict("Y", _with(HOST_ONLY + " (reads tensor values back to the host)", notes), _ops(facts))
    return Verdict("Y", _with(NATIVE, notes), _ops(facts))


def _ops(facts: list[OpFact]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(f.op for f in facts))


def _with(how: str, notes: str) -> str:
    return f"{how} ({notes})" if notes else how
