"""Classify recorded ops against the op-support policy: op rows, findings with remedies, a summary, each a
record of neuronkit/evidence.py.

Nothing here decides support on its own: every category, severity and remedy comes from
`neuronkit/data/op_support.toml` through `neuronkit.policy`, the classifier the simulated device also uses.
"""

from __future__ import annotations


import torch

from neuronkit.evidence import AuditFinding, AuditOp, AuditSummary, OpUse
from neuronkit.op_audit.recorder import OpStats
from neuronkit.nki import is_nki_op
from neuronkit.nki.cost import last_estimate
from neuronkit.policy import (
    COMPLEX_DTYPE,
    CPU_FALLBACK,
    FLOAT64_EMULATED,
    FINDING_SEVERITIES,
    INT64_EMULATED,
    NATIVE,
    Policy,
    load_policy,
)

DTYPE_CATEGORIES = (FLOAT64_EMULATED, INT64_EMULATED, COMPLEX_DTYPE)
_EMULATED = {FLOAT64_EMULATED: torch.float64, INT64_EMULATED: torch.int64}
CLASSIFICATIONS = ("native", "cpu_fallback", "blocked")
_RUNTIME_PHRASES = {"raise": "raises", "cpu_fallback": "falls back to CPU", "decompose": "decomposes into native ops",
                    "run": "runs"}


def classify(ops: dict[str, OpStats],
             policy: Policy | None = None) -> tuple[list[AuditOp], list[AuditFinding], AuditSummary]:
    """(op rows, findings, summary) for a recording, deterministically ordered."""
    policy = policy or load_policy()
    rows: list[AuditOp] = []
    findings: list[AuditFinding] = []
    for name, stats in ops.items():
        nki = is_nki_op(name)  # a custom NKI kernel runs on the device by construction
        categories = {NATIVE: stats.module_paths} if nki else _categories(name, stats, policy)
        blocked = any(policy.severity[c] == "blocker" for c in categories)
        row = AuditOp(
            op=name,
            calls=stats.calls,
            classification="blocked" if blocked else NATIVE if nki or policy.runs_natively(name) else CPU_FALLBACK,
            category=next(iter(categories)),
            dtypes=sorted(_dtype(d) for d in stats.dtypes),
            shapes=stats.shapes,
            module_paths=list(stats.module_paths),
        )
        if nki:
            _add_nki_estimate(row)
        rows.append(row)
        for cat, paths in categories.items():
            if cat != NATIVE:
                findings.append(_finding(name, cat, paths, policy))
    rows.sort(key=lambda r: (-r.calls, r.op))
    order = {c: i for i, c in enumerate(policy.categories)}
    findings.sort(key=lambda f: (FINDING_SEVERITIES.index(f.severity), order[f.category], -f.calls, f.op))
    return rows, findings, _summary(rows, findings, policy)


def _add_nki_estimate(row: AuditOp) -> None:
    """An NKI op's estimated engine time per call (its latest launch, neuronkit/nki/cost.py): the total and
    per engine, in µs; left empty when no launch of it was seen."""
    estimate = last_estimate(row.op)
    if estimate is None:
        return
    row.nki_est_us = round(estimate.total_ns / 1000, 4)
    row.nki_engine_us = {k.removesuffix("_us"): v for k, v in estimate.as_dict().items()
                         if k.endswith("_us") and k != "estimate_us"}


def _categories(name: str, stats: OpStats, policy: Policy) -> dict[str, dict[str, int]]:
    """The op's own category first (its rule, or a call-level blocker such as a mask in the MHA fast path or a sparse
    input), then any other category seen on its calls, each with the module paths it occurred at."""
    rule = policy.rule(name)
    call_level = {c: p for c, p in stats.features.items() if c not in DTYPE_CATEGORIES}
    own = rule.category
    if own in (NATIVE, CPU_FALLBACK) and call_level:
        own = min(call_level, key=policy.categories.index)
    found = {own: stats.module_paths if own == rule.category else call_level[own]}
    # The boxed CPU fallback takes any dtype at its width (NeuronBindings.cpp:483-485): complex tensors fail and
    # 64-bit ones are narrowed only in native ops (dtype_autocast.py runs inside S's op implementations).
    host = rule.is_view or not policy.runs_natively(name)
    for cat in policy.categories:
        if cat in stats.features and cat not in found and not (rule.is_view and cat in DTYPE_CATEGORIES) \
                and not (cat in DTYPE_CATEGORIES and host):
            found[cat] = stats.features[cat]
    return found


def _finding(op: str, category: str, paths: dict[str, int], policy: Policy) -> AuditFinding:
    calls = sum(paths.values())
    return AuditFinding(category=category, severity=policy.severity[category], op=op, calls=calls,
                        module_paths=list(paths), message=_message(op, category, calls, policy),
                        remedy=policy.remedies[category])


def _message(op: str, category: str, calls: int, policy: Policy) -> str:
    times = f"{calls} call{'s' if calls != 1 else ''}"
    if category == CPU_FALLBACK:
        return f"{op} has no native Neuron lowering: {times} fall back to CPU."
    if category == COMPLEX_DTYPE:
        return f"{op} computes on complex tensors in {times}: complex data types are not supported on Neuron."
    if category in _EMULATED:
        wide = _EMULATED[category]
        narrow = policy.emulated_dtypes[wide]
        return f"{op} computes on {_dtype(wide)} in {times}: the device computes it in {_dtype(narrow)}."
    gap = policy.gaps.get(category)
    if gap is not None:  # both facts: the documented gap, and what the device does with it
        return (f"{op} uses {policy.features[category]} in {times}: documented as unsupported by the first "
                f"release; on the device it {_RUNTIME_PHRASES[gap.runtime]}.")
    if policy.severity[category] == "blocker":
        return f"{op} uses {policy.features[category]} in {times}: it fails on the device."
    return f"{op} uses {policy.features[category]} in {times}."


def _summary(rows: list[AuditOp], findings: list[AuditFinding], policy: Policy) -> AuditSummary:
    """Support percentages by distinct op and by call, ops per category, fallbacks and blockers with the
    module paths they come from (in the spirit of `torch_neuronx.analyze`), the custom NKI ops if any."""
    calls = sum(r.calls for r in rows)
    native = [r for r in rows if r.classification == NATIVE]
    nki_ops = sorted(r.op for r in rows if is_nki_op(r.op))
    return AuditSummary(
        distinct_ops=len(rows),
        total_calls=calls,
        support_pct_ops=_pct(len(native), len(rows)),
        support_pct_calls=_pct(sum(r.calls for r in native), calls),
        by_category={c: n for c in policy.categories if (n := sum(r.category == c for r in rows))},
        by_classification={c: sum(r.classification == c for r in rows) for c in CLASSIFICATIONS},
        findings={s: sum(f.severity == s for f in findings) for s in FINDING_SEVERITIES},
        fallbacks=[OpUse(r.op, None, r.calls, r.module_paths) for r in rows if r.classification == CPU_FALLBACK],
        blockers=[OpUse(f.op, f.category, f.calls, f.module_paths) for f in findings if f.severity == "blocker"],
        nki_ops=nki_ops or None,
    )


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _pct(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 1) if whole else None
