"""What notebook 03 says next, from what the op audit found (and what the eager stage saw fall back)."""

from __future__ import annotations

from neuronkit.op_audit.evidence import AuditEvidence
from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.pipeline.stage import STAGE
from neuronkit.workbook.lesson import after, op_list


def next_step(result: StageResult[AuditEvidence], run: RunDir | None) -> str:
    """Blockers first; else the CPU fallbacks, and those the eager run saw that the audit did not."""
    assert result.evidence is not None
    summary = result.evidence.summary
    blockers = [row.op for row in summary.blockers]
    fallbacks = [row.op for row in summary.fallbacks]
    if blockers:
        return (f"**{len(blockers)} blocker(s)**: {op_list(blockers)}. Change the model as each remedy says before "
                "migrating; the report will say *blocked*.")
    text = (f"{len(fallbacks)} op(s) fall back to the CPU: {op_list(fallbacks)}; each remedy says how to avoid "
            "the host round trip." if fallbacks else "Every audited op has a Neuron lowering.")
    earlier = run.read("eager") if run is not None else None
    by_phase = earlier.evidence.fallback_ops_by_phase if earlier is not None and earlier.evidence else {}
    missed = {phase: sorted(set(ops) - set(fallbacks)) for phase, ops in by_phase.items()}
    audited = result.evidence.model.phases
    eager = STAGE["eager"].number
    if missed.get("generate") and "generate" not in audited:
        text += (f" Notebook {eager} also saw {op_list(missed['generate'])} fall back inside `generate()`, which "
                 "this audit traces only with `generate=True`.")
    other = sorted({op for phase, ops in missed.items() if phase != "generate" for op in ops})
    if other:
        text += (f" Notebook {eager} saw {op_list(other)} fall back outside `generate()` where the audit did "
                 "not: the audit runs on other values (weightless), so check those ops' inputs.")
    return text + f" Open {after(result)}: the same model as whole graphs instead of op by op."
