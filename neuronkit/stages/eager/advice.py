"""What notebook 02 says next, from what the eager stage found."""

from __future__ import annotations

from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.stages.eager.evidence import EagerEvidence
from neuronkit.workbook.lesson import after, dependents, op_list


def next_step(result: StageResult[EagerEvidence], run: RunDir | None) -> str:
    """A failure blocks the later stages; else the CPU fallbacks, by phase, and where to look next."""
    if result.status == "fail":
        return ("**The device disagrees with the CPU**: the report will say *blocked*, and notebooks "
                f"{dependents(result.stage)} skip. Start from the output with the largest error in the folded "
                f"record; {after(result)} lists the ops each module issues.")
    assert result.evidence is not None
    phases = {phase: ops for phase, ops in result.evidence.fallback_ops_by_phase.items() if ops}
    if not phases:
        return (f"Every op ran on the device and the answers match. Open {after(result)} to see the whole op "
                "inventory, including the backward pass and the optimizer step.")
    where = "; ".join(f"{phase}: {op_list(ops)}" for phase, ops in phases.items())
    only_generate = set(phases) == {"generate"}
    then = ("They all come from `generate()`, the decoding loop, not from the forward or training step; "
            f"open {after(result)}: it audits forward, backward and the optimizer by default, and "
            "`generate()` too with `generate=True`." if only_generate else
            f"Open {after(result)}: it names the module that issues each one, with a remedy.")
    return f"The answers match, with CPU fallbacks ({where}). {then}"
