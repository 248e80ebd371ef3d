"""What notebook 01 says next, from what the CPU baseline found."""

from __future__ import annotations

from typing import Any

from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.workbook.lesson import after


def next_step(result: StageResult[Any], run: RunDir | None) -> str:
    """A broken reference first; else the one-line move, held to it."""
    if result.status == "fail":
        return "**The CPU reference is broken** (NaN or infinite values): fix the model on the CPU first."
    caveat = f" Note first: {result.summary.split('. ')[0]}." if result.status == "warn" else ""
    return (f"The reference is recorded.{caveat} Open {after(result)}: the one-line move, "
            "`model.to(\"neuron\")`, held to this reference.")
