"""HBM accounting for the simulated device: bytes held by live neuron storages, per logical core.

The real allocator reports `memory_stats()` keyed like CUDA's (`allocated_bytes.all.current`, ...) and
raises out-of-memory when a core's HBM is exhausted (behaviour doc §1, torch_neuronx/memory.py). The
native allocator (csrc/allocator.cpp) counts a storage's bytes when it is created and gives them back
when it dies; an `HbmAccount` reads and resets one core's counters and words the out-of-memory error.
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

    @property
    def allocations(self) -> int:
        return native.counters(self.index)[3]

    @property
    def frees(self) -> int:
        return native.counters(self.index)[4]

    @property
    def num_ooms(self) -> int:
        return native.counters(self.index)[5]

    def reserve(self, nbytes: int) -> None:
        """Count `nbytes` or raise torch.OutOfMemoryError as a full device would."""
        native.reserve(self.index, nbytes)

    def release(self, nbytes: int) -> None:
        native.release(self.index, nbytes)

    def oom_message(self, nbytes: int) -> str:
        """The out-of-memory error's text, when `nbytes` more do not fit (the native allocator raises it)."""
        current = self.current
        return (f"Neuron out of memory. Tried to allocate {_fmt(nbytes)} on neuron:{self.index} "
                f"({_fmt(self.capacity)} HBM per logical NeuronCore; {_fmt(current)} already allocated; "
                f"{_fmt(self.capacity - current)} free). Reduce the batch size or sequence length, use "
                f"bf16, or shard the model across cores.")

    def reset_peak(self) -> None:
        native.reset_peak(self.index)

    def reset_accumulated(self) -> None:
        native.reset_accumulated(self.index)

    def stats(self) -> dict[str, int]:
        """The CUDA-style flat `memory_stats()` dict."""
        _, current, peak, allocations, frees, num_ooms = native.counters(self.index)
        stats: dict[str, int] = {}
        for kind in ("allocated_bytes", "reserved_bytes", "active_bytes"):
            stats[f"{kind}.all.current"] = current
            stats[f"{kind}.all.peak"] = peak
            stats[f"{kind}.all.allocated"] = current  # bytes live now; the simulator has no pool
        stats["allocation.all.allocated"] = allocations
        stats["allocation.all.freed"] = frees
        stats["num_ooms"] = num_ooms
        return stats
