"""Eager-then-compile: the `neuron` torch.compile backend, staged parity checks and shape buckets.

Importing this package registers `backend="neuron"` with TorchDynamo; an installed neuronkit also
provides it through the `torch_dynamo_backends` entry point, so a bare `torch.compile(m,
backend="neuron")` works without this import (behaviour doc §3).
"""

from __future__ import annotations

import importlib
from typing import Any

from neuronkit.compile.backend import NEFFCompilationError, neuron_backend, register
from neuronkit.compile.buckets import BucketPlan, suggest_buckets

register()

_LAZY = {"check": "neuronkit.compile.check", "CheckReport": "neuronkit.compile.check",
         "StageCheck": "neuronkit.compile.check"}

__all__ = ["BucketPlan", "CheckReport", "NEFFCompilationError", "StageCheck", "check", "neuron_backend",
           "suggest_buckets"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'neuronkit.compile' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
