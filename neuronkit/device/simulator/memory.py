"""HBM accounting for the simulated device: bytes held by live neuron storages, per core.

The real allocator reports `memory_stats()` keyed like CUDA's (`allocated_bytes.all.current`, ...) and
raises out-of-memory when a core's HBM is exhausted (behaviour doc §1, torch_neuronx/memory.py). Here a
storage's bytes are counted when it is created and released by a finalizer when it dies.
"""

from __future__ import annotations

import torch

from neuronkit.units import format_bytes as _fmt


class HbmAccount:
    """Current/peak allocated bytes of one logical NeuronCore."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.current = 0
        self.peak = 0
        self.allocations = 0
        self.frees = 0
        self.num_ooms = 0

    def reserve(self, nbytes: int, device_label: str) -> None:
        """Count `nbytes` or raise torch.OutOfMemoryError as a full device would."""
        if self.current + nbytes > self.capacity:
            self.num_ooms += 1
            raise torch.OutOfMemoryError(
                f"Neuron out of memory. Tried to allocate {_fmt(nbytes)} on {device_label} "
                f"({_fmt(self.capacity)} HBM per logical NeuronCore; {_fmt(self.current)} already allocated; "
                f"{_fmt(self.capacity - self.current)} free). Reduce the batch size or sequence length, use "
                f"bf16, or shard the model across cores."
            )
        self.current += nbytes
        self.allocations += 1
        if self.current > self.peak:
            self.peak = self.current

    def release(self, nbytes: int) -> None:
        self.current -= nbytes
        self.frees += 1

    def track(self, storage: torch.UntypedStorage, nbytes: int) -> None:
        """Release `nbytes` when `storage` dies: the storage's Python object lives exactly as long as its
        StorageImpl, and the attribute dies with it (cheaper than a weakref.finalize per allocation)."""
        storage._hbm_allocation = _Allocation(self, nbytes)

    def reset_peak(self) -> None:
        self.peak = self.current

    def stats(self) -> dict[str, int]:
        """The CUDA-style flat `memory_stats()` dict."""
        stats: dict[str, int] = {}
        for kind in ("allocated_bytes", "reserved_bytes", "active_bytes"):
            stats[f"{kind}.all.current"] = self.current
            stats[f"{kind}.all.peak"] = self.peak
            stats[f"{kind}.all.allocated"] = self.current  # bytes live now; the simulator has no pool
        stats["allocation.all.allocated"] = self.allocations
        stats["allocation.all.freed"] = self.frees
        stats["num_ooms"] = self.num_ooms
        return stats



class _Allocation:
    """Bytes of one device storage, given back to the account when the storage is freed."""

    __slots__ = ("account", "nbytes")

    def __init__(self, account: HbmAccount, nbytes: int) -> None:
        self.account = account
        self.nbytes = nbytes

    def __del__(self) -> None:
        self.account.release(self.nbytes)
