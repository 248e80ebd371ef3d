"""Stage 04, torch.compile: the `neuron` backend's graphs, graph breaks, recompiles per input shape,
CPU fallbacks inside compiled graphs, compile time and speed-up against eager (`neuronkit check`'s
compile and timing stages, held to the CPU baseline's reference outputs: eager is not run again for
parity), and shape buckets that bound the compilations real prompt lengths would cause."""

from __future__ import annotations

from typing import Any

from neuronkit.evidence import BucketRow, Buckets, CheckStage, CompileEvidence, CompileTraining, GraphBreak, Parity, \
    ParityRow, rows
from neuronkit.stages import StageResult, recording
from neuronkit.workbook.flow import begin
from neuronkit.workbook.loading import check_verdict, run_check
from neuronkit.workbook.params import Params, require_positive_ints

CHECK_STAGES = ("compile", "timing")


def run(params: Params, device: str = "neuron", timing_runs: int = 5, prompts_file: str | None = None,
        max_buckets: int = 4) -> StageResult:
    """Compile the model for `device` and compare it with the CPU reference; advise buckets for the
    lengths of `prompts_file` (one prompt per line; default: the bundled sample prompts) in at most
    `max_buckets`."""
    skipped = begin(params, "compile")
    if skipped:
        return skipped
    with recording(params.run, "compile") as slot:
        require_positive_ints(timing_runs=timing_runs, max_buckets=max_buckets)
        report = run_check(params, device, CHECK_STAGES, timing_runs=timing_runs)
        slot["evidence"] = evidence({s.stage: s for s in report.stages}, buckets(params, prompts_file, max_buckets))
        slot["status"], slot["summary"] = check_verdict(report, CHECK_STAGES)
    return slot["result"]


def evidence(stages: dict[str, Any], plan: dict[str, Any] | None) -> CompileEvidence:
    """The compile stage's record (neuronkit.evidence.CompileEvidence) from the check's stage records."""
    compiled = stages["compile"].evidence if "compile" in stages else {}
    timing = stages["timing"].evidence if "timing" in stages else {}
    forward, train = timing.get("forward", {}), timing.get("train_step", {})
    parity = compiled.get("parity", {})
    return CompileEvidence(
        graphs=compiled.get("graphs"),
        graph_breaks=rows(GraphBreak, compiled.get("graph_breaks", [])),
        graph_break_count=compiled.get("graph_break_count"),
        recompiles=compiled.get("recompiles"),
        recompile_shapes=compiled.get("recompile_shapes"),
        neffs=compiled.get("neffs"),
        fallback_ops=compiled.get("fallback_ops", []),
        compile_time_s=compiled.get("compile_time_s"),
        backward_compile_time_s=compiled.get("backward_compile_time_s"),
        eager_step_ms=forward.get("eager_ms"),
        compiled_step_ms=forward.get("compiled_ms"),
        speedup=forward.get("speedup"),
        eager_train_step_ms=train.get("eager_ms"),
        compiled_train_step_ms=train.get("compiled_ms"),
        train_speedup=train.get("speedup"),
        parity=Parity(outputs=rows(ParityRow, parity.get("outputs", [])), top1_agreement=parity.get("top1_agreement")),
        training=rows(CompileTraining, [compiled["training"]])[0] if compiled.get("training") else None,
        buckets=bucket_record(plan),
        graph_metrics=compiled.get("graph_metrics", []),
        stages=rows(CheckStage, [s.to_dict() for s in stages.values()]),
    )


def bucket_record(plan: dict[str, Any] | None) -> Buckets | None:
    """Bucket advice (`BucketPlan.to_dict()`) as its typed record."""
    if not plan:
        return None
    (record,) = rows(Buckets, [plan])
    record.alternatives = rows(BucketRow, plan.get("alternatives", []))
    return record


def buckets(params: Params, prompts_file: str | None, max_buckets: int) -> dict[str, Any] | None:
    """Shape-bucket advice for the token lengths of the prompts (None when the model has no tokenizer)."""
    from neuronkit import models
    from neuronkit.graph_compile.buckets import advise_buckets

    plan = advise_buckets(models.load_tokenizer(params.model), models.load_config(params.model), prompts_file,
                          max_buckets)
    return plan.to_dict() if plan else None
