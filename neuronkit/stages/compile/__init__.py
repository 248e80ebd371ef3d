"""Stage 04, torch.compile: the `neuron` backend's graphs, graph breaks, recompiles per input shape, CPU
fallbacks inside compiled graphs, compile time and speed-up against eager (`neuronkit check`'s compile and
timing steps, held to the CPU baseline's reference outputs), and shape buckets that bound the compilations
real prompt lengths would cause."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from neuronkit.errors import NeuronkitInputError, require_positive_ints


@dataclass(frozen=True)
class CompileOptions:
    """The compile stage's options (notebook 04's parameters, `check()`'s keywords)."""

    device: str = "neuron"  # the NeuronCore to compile for, e.g. "neuron:0"
    timing_runs: int = 5  # interleaved runs per median, eager against compiled
    prompts_file: str | None = None  # prompts, one per line, whose lengths size the buckets (None: the bundled ones)
    max_buckets: int = 4  # at most this many shape buckets

    def __post_init__(self) -> None:
        require_positive_ints(timing_runs=self.timing_runs, max_buckets=self.max_buckets)
        if self.prompts_file is not None and not Path(self.prompts_file).is_file():
            raise NeuronkitInputError(f"prompts_file: no prompts file at {self.prompts_file}")
