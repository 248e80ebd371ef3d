"""A `torch_neuronx` module for code written against the real package, present only while simulating.

User code, accelerate and transformers look for `torch_neuronx` (`find_spec("torch_neuronx")`,
`torch_neuronx.get_fallback_ops()`, `from torch_neuronx.profiling import NeuronConfig`). When the real
package is installed the simulator is never installed, so this module never shadows it. It is marked
`__neuronkit_simulated__ = True`, which is how `neuronkit.detect()` tells the two apart.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
from typing import Any

import neuronkit
from neuronkit.device.simulator import module, tracking


def _submodule(name: str, target: str) -> types.ModuleType:
    """`torch_neuronx.<name>`, forwarding attribute access to a neuronkit module on first use."""

    class _Forward(types.ModuleType):
        def __getattr__(self, attr: str) -> Any:
            if attr.startswith("__"):
                raise AttributeError(attr)
            return getattr(importlib.import_module(target), attr)

    sub = _Forward(f"torch_neuronx.{name}")
    sub.__spec__ = importlib.machinery.ModuleSpec(sub.__name__, None)
    sub.__neuronkit_simulated__ = True
    return sub


def install() -> None:
    if "torch_neuronx" in sys.modules:
        return
    shim = types.ModuleType("torch_neuronx", __doc__)
    shim.__spec__ = importlib.machinery.ModuleSpec("torch_neuronx", None, is_package=True)
    shim.__path__ = []
    shim.__version__ = f"0.0.0+neuronkit{neuronkit.__version__}.simulated"
    shim.__neuronkit_simulated__ = True
    shim.get_fallback_ops = tracking.get_fallback_ops
    shim.get_executed_ops = tracking.get_executed_ops
    shim.clear_op_tracking = tracking.clear_op_tracking
    shim.is_neuron_runtime_initialized = module.is_initialized
    for name in ("device_count", "set_device", "synchronize", "Stream", "Event", "memory_stats",
                 "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
                 "reset_peak_memory_stats", "empty_cache", "current_device", "get_device_properties",
                 "current_stream", "default_stream", "set_stream", "stream", "device", "memory_summary",
                 "reset_accumulated_memory_stats", "get_dynamo_metrics", "reset_dynamo_metrics"):
        setattr(shim, name, getattr(module, name))
    sys.modules["torch_neuronx"] = shim
    shim.profiling = _submodule("profiling", "neuronkit.profiling")
    sys.modules["torch_neuronx.profiling"] = shim.profiling
    shim.__getattr__ = _nki_api  # nki_op / wrap_nki, loaded on first use
    from neuronkit.nki import modules

    modules.install()


def _nki_api(attr: str) -> Any:
    """`torch_neuronx.nki_op` / `wrap_nki` (S torch_neuronx/__init__.py imports them from nki_hop)."""
    if attr in ("nki_op", "wrap_nki"):
        return getattr(importlib.import_module("neuronkit.nki.hop"), attr)
    raise AttributeError(f"module 'torch_neuronx' has no attribute {attr!r}")
