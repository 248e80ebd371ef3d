"""What notebook 05 says next, from what the profile found."""

from __future__ import annotations

from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.stages.profile.evidence import ProfileEvidence
from neuronkit.workbook.lesson import after, op_list


def next_step(result: StageResult[ProfileEvidence], run: RunDir | None) -> str:
    """The CPU fallbacks first, then the hottest op, then the report."""
    record = result.evidence
    assert record is not None
    top = record.top_ops[0].name if record.top_ops else None
    names = [row.name for row in record.fallbacks]
    text = (f"Remove the CPU fallbacks first ({op_list(names)}): each copies its tensors to the host and back "
            "on every call. " if names else "")
    if top:
        text += f"The hottest op is `{top}`; on Trainium, confirm it with a real profile before optimising. "
    return text + f"Open {after(result)} for the verdict across all stages."
