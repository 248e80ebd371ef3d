"""What notebook 04 calls: the compile stage (its check steps against the CPU baseline's saved reference: eager
is not run again for parity), and what the notebook says next."""

from __future__ import annotations

import functools
from typing import Any

from neuronkit import slicing
from neuronkit.evidence import fields_of
from neuronkit.pipeline.check import check, check_stages
from neuronkit.pipeline.config import Params
from neuronkit.pipeline.execute import Recording, run_stage
from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.pipeline.reference import Reference
from neuronkit.pipeline.session import Compiled, load, on_core, reference_path, run_slice
from neuronkit.pipeline.stage import STAGE
from neuronkit.stages.compile import CompileOptions
from neuronkit.stages.compile.evidence import CompileCheck, CompileEvidence, CompileTiming
from neuronkit.workbook.lesson import after

STEPS = STAGE["compile"].steps  # the `neuronkit check` steps this stage runs
__all__ = ["Compiled", "evidence", "run"]  # `Compiled`: what the notebook compiled, for `run(compiled=...)`


def run(params: Params, compiled: Compiled | None = None, **options: Any) -> StageResult[CompileEvidence]:
    """Compile the model for `device` and compare it with the CPU reference; advise buckets for the
    lengths of `prompts_file` (one prompt per line; default: the bundled sample prompts) in at most
    `max_buckets` (`CompileOptions`).

    `compiled`: what the notebook's cell compiled, `torch.compile` of a copy of the run's model on `device`
    (`Compiled`). The stage runs that model (no device copy of its own); in a float32 run of the full model
    it also uses its graphs instead of compiling again; in another dtype (the stage runs under autocast) or
    on a layer slice (embeddings and head held fixed) it compiles the same module again."""
    return run_stage("compile", params, options, functools.partial(_check, compiled=compiled))


def _check(params: Params, rec: Recording[CompileEvidence], *, compiled: Compiled | None) -> None:
    opts = params.config.of(CompileOptions)
    config = params.config.with_options(timing_runs=slicing.repeats(run_slice(params), "compile_timing_runs",
                                                                    opts.timing_runs))
    session = on_core(load(params), opts.device).using(reference=Reference.load(reference_path(params)),
                                                       compiled=compiled)
    check(session, STEPS, config).record_into(rec, STEPS, evidence)


def evidence(steps: dict[str, StageResult[Any]]) -> CompileEvidence:
    """The compile stage's record: the check's compile and timing records, one after the other (a skipped
    step's record is empty)."""
    return CompileEvidence(**fields_of(steps["compile"].evidence, CompileCheck),
                           **fields_of(steps["timing"].evidence, CompileTiming),
                           stages=check_stages(steps))


def next_step(result: StageResult[CompileEvidence], run: RunDir | None) -> str:
    """A failure sends the learner back to eager mode; else the graph breaks and buckets to fix first."""
    if result.status == "fail":
        return ("**The compiled model fails or disagrees with the CPU reference**: the folded record has the "
                f"stage that failed and why. Eager mode (notebook {STAGE['eager'].number}) still works for debugging.")
    record = result.evidence
    assert record is not None
    steps = []
    if record.graph_breaks:
        steps.append(f"remove the {len(record.graph_breaks)} graph break(s) (each names its reason and source line)")
    plan = record.buckets
    if plan is not None and plan.distinct_shapes > plan.compilations:
        steps.append(f"pad inputs to the buckets {plan.buckets}: {plan.compilations} compilations instead of "
                     f"{plan.distinct_shapes}, for {plan.padding_overhead:.0f}% extra tokens")
    todo = ("Before serving: " + "; ".join(steps) + ". " if steps else "One graph, no breaks. ")
    return todo + f"Open {after(result)} to see where the time goes, op by op."
