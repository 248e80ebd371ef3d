"""parallel_loader on the CPU (see torch_xla/__init__.py): the loader's batches, on the device."""

import torch


def _to(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _to(v, device) for k, v in batch.items()}
    return batch


class MpDeviceLoader:
    def __init__(self, loader, device, **kwargs):
        self._loader, self._device = loader, device

    def __iter__(self):
        return (_to(batch, self._device) for batch in self._loader)

    def __len__(self):
        return len(self._loader)


class ParallelLoader:
    def __init__(self, loader, devices, **kwargs):
        self._loader = loader

    def per_device_loader(self, device):
        return MpDeviceLoader(self._loader, device)
