"""`neuronkit check`: staged parity checks of a model on the `neuron` device (CPU reference, eager,
greedy generation, training, torch.compile, timings), each stage a `neuronkit.stages.StageResult`.

Imported on demand (it loads transformers); `neuronkit.check(...)` is `neuronkit.checks.check`.
"""

from __future__ import annotations

from neuronkit.checks.parity import CHECK_STAGES, CheckReport, check
from neuronkit.checks.reference import Reference

__all__ = ["CHECK_STAGES", "CheckReport", "Reference", "check"]
