"""What notebook 03 calls: the op audit stage, and what the notebook says next."""

from __future__ import annotations

from typing import Any

from neuronkit.op_audit import audit
from neuronkit.evidence import AuditEvidence
from neuronkit.pipeline.config import Params
from neuronkit.pipeline.execute import Recording, run_stage
from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.stages.audit import AuditOptions
from neuronkit.pipeline.stage import STAGE
from neuronkit.workbook.lesson import after, op_list


def run(params: Params, **options: Any) -> StageResult[AuditEvidence]:
    """Audit the model (weightless unless `generate`, which needs values) and keep the audit JSON as
    the stage's evidence and as `artifacts/audit/audit.json`.

    `training` adds backward and one optimizer step; `generate` adds greedy decoding (causal LMs).
    `fail` on blocker findings, `warn` on findings to plan for (CPU fallbacks, emulated dtypes)."""
    return run_stage("audit", params, options, _audit)


def _audit(params: Params, rec: Recording[AuditEvidence]) -> None:
    opts, config = params.config.of(AuditOptions), params.config
    report = audit(params.model, config=config, backward=opts.training, optimizer_step=opts.training,
                   generate=opts.generate)
    report.to_json(params.run.artifact_dir("audit") / "audit.json")
    rec.evidence = report.evidence()  # with the policy's severities: what the report shows
    summary = report.summary
    counts = summary.findings
    rec.summary = (f"{summary.distinct_ops} distinct ops in {summary.total_calls} calls, "
                   f"{summary.support_pct_ops}% native by op; findings: "
                   + ", ".join(f"{n} {severity}" for severity, n in counts.items()))
    if summary.blockers:
        rec.status = "fail"
    elif counts.get("warn"):
        rec.status = "warn"


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
