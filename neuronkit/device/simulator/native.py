"""The simulated device's native runtime (the C++ extension built from `csrc/` by setup.py).

The extension is built once per torch release, under a name that carries it (`_native_torch2_13_0`,
native_build.py), and is loaded here as `neuronkit.device.simulator._native`. Imported before anything
registers the device; when no build for the running torch exists (a source tree used without installing,
or built by a venv with another torch), this fails with one line naming the command that builds it."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import torch  # the extension links against torch's libraries, which must be loaded first

from neuronkit.device.simulator.native_build import PACKAGE, missing_message, module_name

try:
    sys.modules[f"{PACKAGE}._native"] = importlib.import_module(f"{PACKAGE}.{module_name(torch.__version__)}")
    from neuronkit.device.simulator._native import (  # noqa: F401 - re-exported
        call_rule,
        call_rule_names,
        clear_tracking,
        composite_explicit_overloads,
        counters,
        current_device,
        default_generator,
        device_addmm,
        device_baddbmm,
        device_bmm,
        device_count,
        device_mm,
        exchange_device,
        fused_attention,
        fused_attention_backward,
        init,
        install_kernel,
        install_sdpa_router,
        PythonCall,
        device_results,
        lend_generator,
        neff_forget,
        neff_hits,
        place_process,
        record_op,
        reset_accumulated,
        reset_peak,
        route_to_python,
        set_device,
        slow_calls,
        to_cpu,
        tracked_ops,
        wrap,
    )
except ImportError as exc:
    raise ImportError(missing_message(torch.__version__, Path(__file__).parent, str(exc))) from None

# Why the native per-op kernel sends every op to the Python path (bits for `route_to_python`): observers
# want an event per op, a compiled graph compiles no per-op NEFFs, an LRU-bounded NEFF cache reorders on
# every hit.
ROUTE_OBSERVERS = 1
ROUTE_COMPILED_GRAPH = 2
ROUTE_BOUNDED_CACHE = 4
