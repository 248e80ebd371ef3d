"""Device-side events: what the simulated kernel ran while a PyTorch profiler was recording.

One process-wide `DeviceCapture` sits in `tracking.profiler_observers` for as long as any `NeuronConfig`
with a device mode is alive. The kernel calls those observers only while the profiler records
(neuronkit/device/simulator/kernel.py), so capture costs nothing outside a profile window and never sees
warm-up iterations run before it. Each `OpEvent` carries the op's measured execution in the kernel, its
NEFF cache key, shapes, dtypes and bytes; the capture adds the core and, under `track_modules()`, the
module path. PyTorch runs one profiler at a time, so a window's events are those that started in it.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import Counter
from typing import Iterator, NamedTuple

import torch
from torch.utils.module_tracker import ModuleTracker

from neuronkit.device.simulator import tracking
from neuronkit.device.simulator.tracking import OpEvent

_tracker: ModuleTracker | None = None


class Captured(NamedTuple):
    event: OpEvent
    core: int  # the logical NeuronCore that ran it
    module_path: str | None  # innermost nn.Module (ModuleTracker FQN), when tracked


class DeviceCapture:
    """Collects the kernel's op events until a profiling window takes them."""

    def __init__(self) -> None:
        self.events: list[Captured] = []
        self.users = 0  # live NeuronConfigs that capture device events

    def __call__(self, event: OpEvent) -> None:
        self.events.append(Captured(event, torch.neuron.current_device(), _module_path()))

    def take(self, start_ns: int, end_ns: int) -> list[Captured]:
        """The events that started in [start_ns, end_ns] (perf_counter clock); older ones (from a window
        nobody exported) are discarded with them."""
        window = [c for c in self.events if start_ns <= c.event.start_ns <= end_ns]
        self.events = [c for c in self.events if c.event.start_ns > end_ns]
        return window

    def attach_for(self, owner: object) -> None:
        """Observe the kernel while `owner` lives."""
        if self.users == 0:
            tracking.profiler_observers.append(self)
        self.users += 1
        weakref.finalize(owner, self._release)

    def _release(self) -> None:
        self.users -= 1
        if self.users == 0:
            tracking.profiler_observers.remove(self)
            self.events.clear()


CAPTURE = DeviceCapture()


def select(captured: list[Captured], cores: frozenset[int] | None, limit: int | None) -> tuple[list[Captured], int]:
    """The events of the enabled cores, at most `limit` per core, and how many the cap dropped."""
    kept: list[Captured] = []
    per_core: Counter[int] = Counter()
    dropped = 0
    for c in captured:
        if cores is not None and c.core not in cores:
            continue
        if limit is not None and per_core[c.core] >= limit:
            dropped += 1
            continue
        per_core[c.core] += 1
        kept.append(c)
    return kept, dropped


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
