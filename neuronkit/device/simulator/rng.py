"""Random ops on the neuron device: host kernels, as the real device's CPU fallbacks.

Each logical core has a default generator, and `torch.Generator(device='neuron:N')` makes new ones (native
runtime, csrc/generator.cpp): Philox-style seed and offset, as S's. A random op with a core's default
generator draws from the host's default generator, as S's CPU fallbacks do (csrc/generator.cpp
`lend_generator`; the native per-op path lends a core's default generator itself). An explicit device
generator handed to a random op is refused, as S's boxed CPU fallback passes it to the CPU kernel
(kernel.py `_HostCall.convert`); S lowers no random op that takes one, so `draw` lends it to none today.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from neuronkit.device.simulator import native


def draw(compute: Callable[[], Any], generator: torch.Generator | None, index: int) -> Any:
    """Run `compute()` drawing for `generator`, or for device `index`'s default generator."""
    source = generator if generator is not None else native.default_generator(index)
    return native.lend_generator(source, compute)
