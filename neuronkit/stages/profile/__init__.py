"""Stage 05, profiling: where the time goes on the device, per op, with the documented profiler recipe
(NeuronConfig + NeuronProfiler), a Chrome trace and Parquet tables to dig further."""

from __future__ import annotations

from dataclasses import dataclass

from neuronkit.errors import require_positive_ints


@dataclass(frozen=True)
class ProfileOptions:
    """The profiling stage's options (notebook 05's parameters)."""

    device: str = "neuron"  # the NeuronCore to profile on, e.g. "neuron:0"
    steps: int = 5  # profiled forward passes
    warmup: int = 3  # unprofiled passes before them
    top: int = 15  # ops kept in the record, by device time

    def __post_init__(self) -> None:
        require_positive_ints(steps=self.steps, warmup=self.warmup, top=self.top)
