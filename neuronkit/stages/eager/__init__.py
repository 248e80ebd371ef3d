"""Stage 02, eager on neuron: the one-line move, `model.to("neuron")`, and whether the answers survive it
(`neuronkit check`'s eager, generate and train steps against the CPU baseline's reference outputs), plus what
the device saw on the way (CPU fallbacks, NEFF cache, memory)."""

from __future__ import annotations

from dataclasses import dataclass

from neuronkit.errors import NeuronkitInputError, require_positive_ints


@dataclass(frozen=True)
class EagerOptions:
    """The eager stage's options (notebook 02's parameters, `check()`'s keywords)."""

    device: str = "neuron"  # the NeuronCore to run on, e.g. "neuron:0"
    train_steps: int = 2  # SGD steps compared between CPU and neuron
    generate_tokens: int = 8  # greedy tokens compared (causal LMs, encoder-decoders)
    lr: float = 1e-2  # the training steps' SGD learning rate

    def __post_init__(self) -> None:
        require_positive_ints(train_steps=self.train_steps, generate_tokens=self.generate_tokens)
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or not self.lr > 0:
            raise NeuronkitInputError(f"lr must be a positive number, got {self.lr!r}")
