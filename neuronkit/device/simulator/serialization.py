"""torch.save / torch.load / copy.deepcopy of neuron tensors.

The Python backend has no PrivateUse1 allocator, so anything that asks for `UntypedStorage(n,
device='neuron')` would reach a null allocator (design/simulated-device.md §A2.7). Storages are
therefore created through the device's `empty` kernel, and checkpoints saved from the device restore
onto it through a registered serialization package.
"""

from __future__ import annotations

import torch

_original_new = torch.UntypedStorage.__new__


def _tag(storage) -> str | None:
    return "neuron:0" if storage.device.type == "neuron" else None


def _deserialize(obj, location: str):
    if not location.startswith("neuron"):
        return None
    host = torch.empty(0, dtype=torch.uint8).set_(obj.untyped_storage() if hasattr(obj, "untyped_storage") else obj)
    return host.to("neuron").untyped_storage()


def _storage_new(cls, *args, device=None, **kwargs):
    if device is not None and torch.device(device).type == "neuron":
        nbytes = int(args[0]) if args else 0
        return torch.empty(nbytes, dtype=torch.uint8, device="neuron").untyped_storage()
    if device is None:
        return _original_new(cls, *args, **kwargs)
    return _original_new(cls, *args, device=device, **kwargs)


def install() -> None:
    torch.serialization.register_package(5, _tag, _deserialize)
    torch.UntypedStorage.__new__ = _storage_new
