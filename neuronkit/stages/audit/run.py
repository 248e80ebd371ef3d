"""Stage 03, op audit: every ATen op the model runs, classified against Neuron support (native, CPU
fallback, first-release blocker), with the module that issued it and a remedy per finding."""

from __future__ import annotations

from typing import Any

from neuronkit.op_audit import audit
from neuronkit.op_audit.evidence import AuditEvidence
from neuronkit.pipeline.config import Params
from neuronkit.pipeline.execute import Recording, run_stage
from neuronkit.pipeline.record import StageResult
from neuronkit.stages.audit import Options


def run(params: Params, **options: Any) -> StageResult[AuditEvidence]:
    """Audit the model (weightless unless `generate`, which needs values) and keep the audit JSON as
    the stage's evidence and as `artifacts/audit/audit.json`.

    `training` adds backward and one optimizer step; `generate` adds greedy decoding (causal LMs).
    `fail` on blocker findings, `warn` on findings to plan for (CPU fallbacks, emulated dtypes)."""
    return run_stage("audit", params, options, _audit)


def _audit(params: Params, rec: Recording[AuditEvidence]) -> None:
    opts, config = params.config.of(Options), params.config
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
