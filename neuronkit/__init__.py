"""neuronkit: try a PyTorch / Hugging Face migration to AWS Trainium before renting one.

The public API is resolved lazily on first use. torch is imported first: its backend autoload installs
`neuronkit.device`, which needs `neuronkit.policy`; importing torch from inside a half-imported
neuronkit module would make that a circular import. The one exception is the `neuronkit` command, which
starts its notebook kernels' fork server before paying for torch (seconds), then imports torch before any
other neuronkit module (`neuronkit.cli.main`).
"""

from __future__ import annotations

import importlib as _importlib
import os as _os
import sys as _sys
from typing import Any as _Any

__version__ = "0.1.0"  # set before torch loads: the autoloaded device reports it

if _os.path.basename((getattr(_sys, "argv", None) or [""])[0]) != "neuronkit":
    import torch as _torch  # noqa: F401 - see the docstring

_EXPORTS: dict[str, str] = {
    "detect": "neuronkit.device.detect",
    "DeviceReport": "neuronkit.device.detect",
    "resolve_device_map": "neuronkit.placement",
    "audit": "neuronkit.op_audit",
    "check": "neuronkit.checks",
    "suggest_buckets": "neuronkit.graph_compile.buckets",
    "profile": "neuronkit.profiling",
    "plan": "neuronkit.planner.plan",
    "run_workbook": "neuronkit.workbook",
    "report": "neuronkit.reporting",
    "load_policy": "neuronkit.policy",
    "StageResult": "neuronkit.pipeline.record",
    "RunDir": "neuronkit.pipeline.record",
    "RunConfig": "neuronkit.pipeline.config",
    "NeuronkitInputError": "neuronkit.errors",
    "example_inputs": "neuronkit.inputs",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> _Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'neuronkit' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public API (what `__all__` lists) and the package's version, for tab completion and `dir()`."""
    return sorted({*__all__, "__version__"})
