"""Stage 03, op audit: every ATen op the model runs, classified against Neuron support (native, CPU
fallback, first-release blocker), with the module that issued it and a remedy per finding."""

from __future__ import annotations

from neuronkit.stages import StageResult, recording
from neuronkit.workbook.flow import begin
from neuronkit.workbook.params import Params


def run(params: Params, training: bool = True, generate: bool = False) -> StageResult:
    """Audit the model (weightless unless `generate`, which needs values) and keep the audit JSON as
    the stage's evidence and as `artifacts/audit/audit.json`.

    `training` adds backward and one optimizer step; `generate` adds greedy decoding (causal LMs).
    `fail` on blocker findings, `warn` on findings to plan for (CPU fallbacks, emulated dtypes)."""
    skipped = begin(params, "audit")
    if skipped:
        return skipped
    with recording(params.run, "audit") as slot:
        import neuronkit

        report = neuronkit.audit(params.model, dtype=params.dtype, batch_size=params.batch_size,
                                 seq_len=params.seq_len, backward=training, optimizer_step=training,
                                 generate=generate)
        report.to_json(params.run.artifact_dir("audit") / "audit.json")
        slot["evidence"] = report.evidence()  # with the policy's severities: what the report shows
        summary = report.summary
        counts = summary.findings
        slot["summary"] = (f"{summary.distinct_ops} distinct ops in {summary.total_calls} calls, "
                           f"{summary.support_pct_ops}% native by op; findings: "
                           + ", ".join(f"{n} {severity}" for severity, n in counts.items()))
        if summary.blockers:
            slot["status"] = "fail"
        elif counts.get("warn"):
            slot["status"] = "warn"
    return slot["result"]
