"""The report's caveat from the CPU baseline's record: a loss at chance level (random or broken weights)."""

from __future__ import annotations

import math

from neuronkit.reporting.model import RunRecords

# A CPU loss this close (relative) to ln(classes), a uniform guess's cross-entropy, means untrained weights.
CHANCE_MARGIN = 0.1


def caveats(run: RunRecords) -> list[str]:
    """A reason when the CPU baseline's loss is a uniform guess's (within CHANCE_MARGIN of ln(classes), the
    logits' last dimension): random or broken weights, unless a stage already says the run used random
    weights."""
    baseline = run.evidence("cpu_baseline")
    if baseline is None or not isinstance(baseline.loss, (int, float)) or not baseline.logits_shape:
        return []
    classes = int(baseline.logits_shape[-1])
    chance = math.log(classes) if classes > 1 else 0.0
    if not chance or abs(baseline.loss - chance) > CHANCE_MARGIN * chance:
        return []
    if any("random weights" in (record.summary or "") for record in run.records.values() if record is not None):
        return []
    return [f"CPU baseline: loss {baseline.loss:.3g} is within {CHANCE_MARGIN:.0%} of ln({classes:,}) = "
            f"{chance:.3g}, a uniform guess's: the weights look random or broken, so parity says nothing of the "
            "trained model."]
