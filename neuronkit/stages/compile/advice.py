"""What notebook 04 says next, from what the compile stage found."""

from __future__ import annotations

from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.pipeline.stage import STAGE
from neuronkit.stages.compile.evidence import CompileEvidence
from neuronkit.workbook.lesson import after


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
