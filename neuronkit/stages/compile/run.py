"""Stage 04, torch.compile: the `neuron` backend's graphs, graph breaks, recompiles per input shape,
CPU fallbacks inside compiled graphs, compile time and speed-up against eager (`neuronkit check`'s
compile and timing stages, held to the CPU baseline's reference outputs: eager is not run again for
parity), and shape buckets that bound the compilations real prompt lengths would cause."""

from __future__ import annotations

from neuronkit import slicing
from neuronkit.checks.parity import Compiled  # what the notebook compiled, for `run(compiled=...)`
from neuronkit.evidence import CompileCheck, CompileEvidence, CompileTiming, fields_of
from neuronkit.pipeline import STAGE
from neuronkit.stages import StageResult, recording
from neuronkit.workbook.flow import begin
from neuronkit.workbook.loading import check_stages, check_verdict, ran_on, run_check, run_slice
from neuronkit.workbook.params import Params, require_positive_ints

CHECK_STAGES = STAGE["compile"].steps  # the `neuronkit check` steps this stage runs


def run(params: Params, device: str = "neuron", timing_runs: int = 5, prompts_file: str | None = None,
        max_buckets: int = 4, compiled: Compiled | None = None) -> StageResult:
    """Compile the model for `device` and compare it with the CPU reference; advise buckets for the
    lengths of `prompts_file` (one prompt per line; default: the bundled sample prompts) in at most
    `max_buckets`.

    `compiled`: what the notebook's cell compiled, `torch.compile` of a copy of the run's model on `device`
    (`neuronkit.checks.parity.Compiled`). The stage runs that model (no device copy of its own); in a
    float32 run of the full model it also uses its graphs instead of compiling again; in another dtype
    (the stage runs under autocast) or on a layer slice (embeddings and head held fixed) it compiles the
    same module again."""
    skipped = begin(params, "compile")
    if skipped:
        return skipped
    with recording(params.run, "compile") as slot:
        require_positive_ints(timing_runs=timing_runs, max_buckets=max_buckets)
        timing_runs = slicing.repeats(run_slice(params), "compile_timing_runs", timing_runs)
        report = run_check(params, device, CHECK_STAGES, timing_runs=timing_runs, bucket_prompts=prompts_file,
                           max_buckets=max_buckets, compiled=compiled)
        slot["evidence"] = record = evidence({s.stage: s for s in report.stages})
        record.model_slice = report.model_slice
        slot["status"], slot["summary"] = check_verdict(report, CHECK_STAGES)
        slot["summary"] += ran_on(report.model_slice)
    return slot["result"]


def evidence(stages: dict[str, StageResult]) -> CompileEvidence:
    """The compile stage's record: the check's compile and timing records, one after the other (a skipped
    stage's record is empty)."""
    return CompileEvidence(**fields_of(stages["compile"].evidence, CompileCheck),
                           **fields_of(stages["timing"].evidence, CompileTiming),
                           stages=check_stages(stages))
