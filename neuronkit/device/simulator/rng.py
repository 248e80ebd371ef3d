"""Random ops draw from the neuron device's generators.

Each logical core has a default generator, and `torch.Generator(device='neuron:N')` makes new ones (native
runtime, csrc/generator.cpp). CPU kernels only accept CPU generators, so a random op's CPU kernel runs
with the host's default generator holding the device generator's state, which goes back to the device
generator afterwards; the host generator's own state is restored, so device draws do not consume it
(csrc/generator.cpp `lend_generator`; the native per-op path lends a core's default generator itself).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from neuronkit.device.simulator import native


def draw(compute: Callable[[], Any], generator: torch.Generator | None, index: int) -> Any:
    """Run `compute()` drawing from `generator`, or from device `index`'s default."""
    source = generator if generator is not None else native.default_generator(index)
    return native.lend_generator(source, compute)
