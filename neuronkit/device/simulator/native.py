"""The simulated device's native runtime (the C++ extension `_native`, built from `csrc/` by setup.py).

Imported before anything registers the device; when the extension was never built (a source tree used
without installing), this fails with one line naming the command that builds it."""

from __future__ import annotations

import torch  # noqa: F401 - the extension links against torch's libraries, which must be loaded first

try:
    from neuronkit.device.simulator._native import (  # noqa: F401 - re-exported
        counters,
        current_device,
        default_generator,
        device_count,
        exchange_device,
        init,
        reset_accumulated,
        reset_peak,
        set_device,
        to_cpu,
        wrap,
    )
except ImportError as exc:
    raise ImportError(
        f"neuronkit's native device runtime is not built ({exc}); build it with `pip install -e . "
        f"--no-build-isolation` (or, in a source tree, `python setup.py build_ext --inplace`)") from None
