"""A model's public PyTorch calls in AWS's compatibility-table vocabulary (`neuronkit audit --compat`): each
API the recorder saw, classified by the ATen ops its calls ran as the audit classified them (so input-aware
rules, preconditions and dtypes count), by the one rule of `neuronkit.compat.vocabulary`."""

from __future__ import annotations

import dataclasses

from neuronkit.compat.names import returns_host_values
from neuronkit.compat.vocabulary import HOST_ONLY, STATUSES, OpFact, classify
from neuronkit.evidence import AuditApi, AuditFinding, AuditOp
from neuronkit.op_audit.recorder import ApiStats
from neuronkit.policy import INPUT_FALLBACK, NATIVE, Policy

_COLLECTIVE_NAMESPACES = ("c10d::", "_c10d_functional::", "c10d_functional::")
_ORDER = ("N", "CPU_FALLBACK", "unknown", "Y")  # the rows a team must act on first


def api_rows(apis: dict[str, ApiStats], ops: list[AuditOp], findings: list[AuditFinding],
             policy: Policy) -> list[AuditApi]:
    """One row per public API (or scope of non-public calls), most severe status first, then most calls."""
    assert set(_ORDER) == set(STATUSES)
    by_op = {row.op: row for row in ops}
    categories: dict[str, set[str]] = {}
    for finding in findings:
        categories.setdefault(finding.op, set()).add(finding.category)
    rows = []
    for key, stats in apis.items():
        facts = [_fact(op, by_op.get(op), categories.get(op, set()), dtypes, policy)
                 for op, dtypes in stats.ops.items()]
        verdict = classify(facts)
        if not facts:
            verdict = dataclasses.replace(verdict, how=f"{HOST_ONLY} (its calls here ran no ATen op)")
        namespace, api = ("", key) if key.startswith("<") else key.rsplit(".", 1)
        rows.append(AuditApi(namespace=namespace, api=api, calls=stats.calls, status=verdict.status,
                             how=verdict.how, aten_ops=list(verdict.aten_ops), dtypes=list(verdict.dtypes)))
    rows.sort(key=lambda r: (_ORDER.index(r.status), -r.calls, r.namespace, r.api))
    return rows


def _fact(op: str, row: AuditOp | None, categories: set[str], dtypes: set, policy: Policy) -> OpFact:
    names = tuple(sorted(str(d).removeprefix("torch.") for d in dtypes))
    found = sorted(c for c in categories if c != NATIVE)
    if op.startswith(_COLLECTIVE_NAMESPACES):
        return OpFact(op, "collective")
    if row is None:
        return OpFact(op, "unknown", note=f"{op} ran but the audit has no row for it")
    if row.classification == "blocked":
        blockers = [c for c in found if policy.severity.get(c) == "blocker"]
        return OpFact(op, "blocked", note="; ".join(policy.features.get(c, c) for c in blockers))
    if row.classification == "cpu_fallback" or INPUT_FALLBACK in categories:
        note = policy.features[INPUT_FALLBACK] if INPUT_FALLBACK in categories else policy.rule(op).feature
        return OpFact(op, "fallback", names, note)
    return OpFact(op, "native", note=", ".join(found), host_value=returns_host_values(op))
