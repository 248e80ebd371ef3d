"""Device-side events: what the simulated kernel ran while a PyTorch profiler was recording.

A `DeviceCapture` sits in `tracking.profiler_observers`, which the kernel calls only while the
profiler records (neuronkit/device/simulator/kernel.py), so it costs nothing outside a profile window and
never sees warm-up iterations run before it. Each `OpEvent` carries the op's measured execution in the
kernel, its NEFF cache key, shapes, dtypes and bytes; the capture adds the module path when
`track_modules()` is active.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Iterator, NamedTuple

import torch
from torch.utils.module_tracker import ModuleTracker

from neuronkit.device.simulator.tracking import OpEvent

_tracker: ModuleTracker | None = None


class Captured(NamedTuple):
    event: OpEvent
    core: int  # the logical NeuronCore that ran it
    module_path: str | None  # innermost nn.Module (ModuleTracker FQN), when tracked


class DeviceCapture:
    """Collects op events for the cores it is enabled for, up to `limit` per core (then counts drops)."""

    def __init__(self, cores: frozenset[int] | None, limit: int | None) -> None:
        self.cores = cores
        self.limit = limit
        self.events: list[Captured] = []
        self.per_core: Counter[int] = Counter()
        self.dropped = 0

    def __call__(self, event: OpEvent) -> None:
        core = torch.neuron.current_device()
        if self.cores is not None and core not in self.cores:
            return
        if self.limit is not None and self.per_core[core] >= self.limit:
            self.dropped += 1
            return
        self.per_core[core] += 1
        self.events.append(Captured(event, core, _module_path()))

    def take(self, start_ns: int, end_ns: int) -> tuple[list[Captured], int]:
        """The events that started in [start_ns, end_ns] (perf_counter clock) and the drop count; older
        events (from a profile nobody exported) are discarded with them."""
        window = [c for c in self.events if start_ns <= c.event.start_ns <= end_ns]
        dropped = self.dropped
        self.events = [c for c in self.events if c.event.start_ns > end_ns]
        self.per_core = Counter(c.core for c in self.events)
        self.dropped = 0
        return window, dropped


@contextlib.contextmanager
def track_modules() -> Iterator[None]:
    """Record which nn.Module each captured op ran in (forward and backward), via ModuleTracker."""
    global _tracker
    with ModuleTracker() as tracker:
        _tracker = tracker
        try:
            yield
        finally:
            _tracker = None


def _module_path() -> str | None:
    if _tracker is None:
        return None
    active = _tracker.parents - {"Global"}  # the entered modules: one chain of nested FQNs
    return max(active, key=len) if active else None
