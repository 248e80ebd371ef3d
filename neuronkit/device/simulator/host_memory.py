"""Pinned host memory for the simulated device.

PyTorch pins host memory through the current accelerator's hooks, which the Python backend cannot
provide (`getPinnedMemoryAllocator`), so `pin_memory()` — called by DataLoader(pin_memory=True) and
Hugging Face's Trainer by default — would raise. Pinning only speeds host→device copies, and the
simulated device copies from pageable memory anyway, so pinning for `neuron` returns the tensor as it
is (`is_pinned()` stays False).
"""

from __future__ import annotations

import torch

_original_pin_memory = torch.Tensor.pin_memory


def _pin_memory(self: torch.Tensor, device: str | torch.device | None = None) -> torch.Tensor:
    target = torch.device(device) if device is not None else torch.accelerator.current_accelerator()
    if target is not None and target.type == "neuron":
        return self
    return _original_pin_memory(self) if device is None else _original_pin_memory(self, device)


def install() -> None:
    torch.Tensor.pin_memory = _pin_memory
