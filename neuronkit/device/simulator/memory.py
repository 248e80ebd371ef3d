"""HBM accounting for the simulated device: bytes held by live neuron storages, per core.

The real backend reports `memory_stats()` as nested dicts (`{"allocated_bytes": {"current", "peak",
"allocated", "freed"}, ..., "num_ooms", ...}`; S: csrc/core/NeuronBindings.cpp:1239-1262), documents
reserved bytes as always 0 (S: torch_neuronx/memory.py:38), and raises `RuntimeError("NRT allocation
failed for size N (OOM)")` when a core's HBM is exhausted (S: csrc/core/allocator/
NeuronCachingAllocator.cpp:82-88). Here a storage's bytes are counted when it is created and released
when it dies; the OOM is a `torch.OutOfMemoryError`, which is a RuntimeError with that message.
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
        self.bytes_allocated = 0  # cumulative
        self.bytes_freed = 0

    def reserve(self, nbytes: int, device_label: str) -> None:
        """Count `nbytes` or raise the device's OOM (a RuntimeError; also a torch.OutOfMemoryError)."""
        if self.current + nbytes > self.capacity:
            self.num_ooms += 1
            raise torch.OutOfMemoryError(
                f"NRT allocation failed for size {nbytes} (OOM): {_fmt(nbytes)} on {device_label} "
                f"({_fmt(self.capacity)} HBM per logical NeuronCore; {_fmt(self.current)} already allocated; "
                f"{_fmt(self.capacity - self.current)} free). Reduce the batch size or sequence length, use "
                f"bf16, or shard the model across cores."
            )
        self.current += nbytes
        self.bytes_allocated += nbytes
        self.allocations += 1
        if self.current > self.peak:
            self.peak = self.current

    def release(self, nbytes: int) -> None:
        self.current -= nbytes
        self.bytes_freed += nbytes
        self.frees += 1

    def track(self, storage: torch.UntypedStorage, nbytes: int) -> None:
        """Release `nbytes` when `storage` dies: the storage's Python object lives exactly as long as its
        StorageImpl, and the attribute dies with it (cheaper than a weakref.finalize per allocation)."""
        storage._hbm_allocation = _Allocation(self, nbytes)

    def reset_peak(self) -> None:
        self.peak = self.current

    def stats(self) -> dict[str, object]:
        """`memory_stats()` in the source's nested shape (reserved: always 0, as documented)."""
        used = {"current": self.current, "peak": self.peak, "allocated": self.bytes_allocated,
                "freed": self.bytes_freed}
        return {"allocated_bytes": used, "reserved_bytes": dict.fromkeys(used, 0), "active_bytes": dict(used),
                "num_alloc_retries": 0, "num_ooms": self.num_ooms, "num_tensor_frees": self.frees,
                "allocation_requests": self.allocations}



class _Allocation:
    """Bytes of one device storage, given back to the account when the storage is freed."""

    __slots__ = ("account", "nbytes")

    def __init__(self, account: HbmAccount, nbytes: int) -> None:
        self.account = account
        self.nbytes = nbytes

    def __del__(self) -> None:
        self.account.release(self.nbytes)
