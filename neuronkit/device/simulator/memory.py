"""HBM accounting for the simulated device: bytes held by live neuron storages, per logical core.

The real backend reports `memory_stats()` as nested dicts (`{"allocated_bytes": {"current", "peak",
"allocated", "freed"}, ..., "num_ooms", ...}`; S: csrc/core/NeuronBindings.cpp:1239-1262), documents
reserved bytes as always 0 (S: torch_neuronx/memory.py:38), and raises `RuntimeError("NRT allocation
failed for size N (OOM)")` when a core's HBM is exhausted (S: csrc/core/allocator/
NeuronCachingAllocator.cpp:82-88). The native allocator (csrc/allocator.cpp) counts a storage's bytes when
it is created and gives them back when it dies; an `HbmAccount` reads and resets one core's counters and
words the out-of-memory error, which the allocator raises as a `torch.OutOfMemoryError` (a RuntimeError).
"""

from __future__ import annotations

from neuronkit.device.simulator import native
from neuronkit.units import format_bytes as _fmt


class HbmAccount:
    """Current/peak allocated bytes of one logical NeuronCore (`neuron:<index>`)."""

    def __init__(self, capacity: int, index: int = 0) -> None:
        self.capacity = capacity
        self.index = index

    @property
    def current(self) -> int:
        return native.counters(self.index)[1]

    @property
    def peak(self) -> int:
        return native.counters(self.index)[2]

    def oom_message(self, nbytes: int) -> str:
        """The out-of-memory error's text, when `nbytes` more do not fit (the native allocator raises it)."""
        current = self.current
        return (f"NRT allocation failed for size {nbytes} (OOM): {_fmt(nbytes)} on neuron:{self.index} "
                f"({_fmt(self.capacity)} HBM per logical NeuronCore; {_fmt(current)} already allocated; "
                f"{_fmt(self.capacity - current)} free). Reduce the batch size or sequence length, use "
                f"bf16, or shard the model across cores.")

    def reset_peak(self) -> None:
        native.reset_peak(self.index)

    def reset_accumulated(self) -> None:
        native.reset_accumulated(self.index)

    def stats(self) -> dict[str, object]:
        """`memory_stats()` in the source's nested shape (reserved: always 0, as documented)."""
        _, current, peak, allocations, frees, num_ooms, allocated, freed = native.counters(self.index)
        used = {"current": current, "peak": peak, "allocated": allocated, "freed": freed}
        return {"allocated_bytes": used, "reserved_bytes": dict.fromkeys(used, 0), "active_bytes": dict(used),
                "num_alloc_retries": 0, "num_ooms": num_ooms, "num_tensor_frees": frees,
                "allocation_requests": allocations}
