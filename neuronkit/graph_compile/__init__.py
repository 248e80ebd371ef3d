"""Eager-then-compile: the `neuron` torch.compile backend, staged parity checks and shape buckets.

Importing this package registers `backend="neuron"` with TorchDynamo; an installed neuronkit also
provides it through the `torch_dynamo_backends` entry point, so a bare `torch.compile(m,
backend="neuron")` works without this import (behaviour doc §3). The parity checks live in
`neuronkit.checks` (`neuronkit.check`), imported on demand: they load transformers, which compiling a
model does not need.
"""

from __future__ import annotations

from neuronkit.graph_compile.backend import NEFFCompilationError, neuron_backend, register
from neuronkit.graph_compile.buckets import BucketPlan, Bucketing, sample_lengths, suggest_buckets

register()

__all__ = ["BucketPlan", "Bucketing", "NEFFCompilationError", "neuron_backend", "sample_lengths", "suggest_buckets"]
