"""The simulated device's native runtime (the C++ extension `_native`, built from `csrc/` by setup.py).

Imported before anything registers the device; when the extension was never built (a source tree used
without installing), this fails with one line naming the command that builds it."""

from __future__ import annotations

import torch  # noqa: F401 - the extension links against torch's libraries, which must be loaded first

try:
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
    raise ImportError(
        f"neuronkit's native device runtime is not built ({exc}); build it with `pip install -e . "
        f"--no-build-isolation` (or, in a source tree, `python setup.py build_ext --inplace`)") from None

# Why the native per-op kernel sends every op to the Python path (bits for `route_to_python`): observers
# want an event per op, a compiled graph compiles no per-op NEFFs, an LRU-bounded NEFF cache reorders on
# every hit.
ROUTE_OBSERVERS = 1
ROUTE_COMPILED_GRAPH = 2
ROUTE_BOUNDED_CACHE = 4
