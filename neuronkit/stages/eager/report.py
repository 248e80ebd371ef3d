"""The report's numbers from the eager stage's record: the largest error against the CPU, and the ops it
saw fall back to the CPU, by phase."""

from __future__ import annotations

from neuronkit.policy import base_name
from neuronkit.reporting.model import KeyNumber, RunRecords
from neuronkit.stages.eager.evidence import EagerEvidence


def key_numbers(run: RunRecords) -> list[KeyNumber]:
    """The largest absolute error of any output against the CPU reference."""
    eager = run.evidence("eager")
    largest = eager.parity.largest_abs_err() if eager is not None and hasattr(eager.parity, "outputs") else None
    if largest is None:
        return []
    return [KeyNumber("Eager vs CPU", f"{largest:.1e}", "largest absolute error of any output", largest,
                      "absolute error")]


def fallbacks(record: EagerEvidence) -> list[tuple[str, str]]:
    """(op, phase) for every op the eager run saw fall back: by phase (forward, train, generate); an op no
    phase list names (an older record) counts as the forward, never as the decoding loop only."""
    by_phase = record.fallback_ops_by_phase or {}
    seen = [(str(op), phase) for phase in ("forward", "train", "generate") for op in by_phase.get(phase) or []]
    named = {base_name(op) for op, _ in seen}
    return seen + [(str(op), "forward") for op in record.fallback_ops if base_name(str(op)) not in named]
