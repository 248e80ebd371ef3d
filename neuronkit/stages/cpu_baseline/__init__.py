"""Stage 01, CPU baseline: the model's behaviour on the CPU, the reference every later stage is held to
(forward time, loss, and a greedy generation or a masked-word fill a person can read)."""

from __future__ import annotations

from dataclasses import dataclass

from neuronkit.errors import require_positive_ints


@dataclass(frozen=True)
class CpuBaselineOptions:
    """The CPU baseline's options (notebook 01's parameters)."""

    prompt: str = "A migration starts with"  # greedy generation's prompt (causal LMs), or the masked LM's text
    max_new_tokens: int = 16  # tokens greedy generation adds
    timing_steps: int = 5  # forward passes timed (median, after a warm-up)

    def __post_init__(self) -> None:
        require_positive_ints(max_new_tokens=self.max_new_tokens, timing_steps=self.timing_steps)
