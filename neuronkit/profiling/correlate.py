"""Device executions as PyTorch profiler events, linked to the framework ops that launched them.

Kineto has no Neuron plugin here, so `key_averages()` would report zero device time. What a device
plugin produces on CUDA or Neuron is (a) device-side events (`DeviceType.PrivateUse1`) and (b) a link
from each to its launching CPU op, whose `kernels` then carry the device time. `attach` builds exactly
those `FunctionEvent`s from the simulated kernel's measured executions, so the stock `key_averages()` /
`table(sort_by="self_privateuse1_time_total")` aggregate them with no change to PyTorch. Links are found
by time: the kernel's `perf_counter` timestamps are moved onto Kineto's wall clock and each execution is
matched to the same-named CPU op that overlaps it most.
"""

from __future__ import annotations

import bisect
import itertools
import time
from dataclasses import dataclass

from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

from neuronkit.device.simulator.tracking import OpEvent
from neuronkit.profiling.capture import Captured
from neuronkit.profiling.roofline import CorePeaks, Estimate, estimate

_NEIGHBOURS = 4  # same-named CPU ops examined around a device event (nesting, clock jitter)


@dataclass(slots=True)
class DeviceOp:
    """One captured execution, placed on the profiler's timeline."""

    seq: int
    captured: Captured
    start_ns: int  # since the profiler's trace start (Kineto clock)
    estimate: Estimate
    cpu: FunctionEvent | None = None  # the framework op that launched it

    @property
    def event(self) -> OpEvent:
        return self.captured.event

    @property
    def device_name(self) -> str:
        """How the device-side execution is named in tables and traces."""
        return f"nc_exec[{self.event.name}]"


def device_ops(captured: list[Captured], trace_start_ns: int, peaks: CorePeaks) -> list[DeviceOp]:
    """Place captured events on the trace timeline and estimate each on Trainium2."""
    perf_to_wall = time.time_ns() - time.perf_counter_ns()
    return [
        DeviceOp(i, c, c.event.start_ns + perf_to_wall - trace_start_ns,
                 estimate(c.event.name, c.event.input_shapes, c.event.input_dtypes, c.event.bytes_in,
                          c.event.bytes_out, peaks))
        for i, c in enumerate(captured)
    ]


def link(ops: list[DeviceOp], events: list[FunctionEvent]) -> None:
    """Set each op's `cpu` to the same-named, synchronous CPU event it overlaps most."""
    cpu = sorted((e for e in events if e.device_type == DeviceType.CPU and not e.is_async),
                 key=lambda e: (e.name, e.time_range.start))
    by_name = {name: list(group) for name, group in itertools.groupby(cpu, key=lambda e: e.name)}
    starts = {name: [e.time_range.start for e in group] for name, group in by_name.items()}
    for op in ops:
        candidates = by_name.get(op.event.name)
        if not candidates:
            continue
        start_us = op.start_ns / 1000
        end_us = start_us + op.event.duration_ns / 1000
        i = bisect.bisect_right(starts[op.event.name], start_us)
        best, best_overlap = None, 0.0
        for e in candidates[max(i - _NEIGHBOURS, 0):i + 1]:
            overlap = min(end_us, e.time_range.end) - max(start_us, e.time_range.start)
            if overlap > best_overlap or (best is not None and overlap == best_overlap
                                          and e.time_range.elapsed_us() < best.time_range.elapsed_us()):
                best, best_overlap = e, overlap
        op.cpu = best


def attach(ops: list[DeviceOp], events: list[FunctionEvent], use_device: str | None) -> None:
    """Add a PrivateUse1 event per native execution to the profiler's events, and its time to the
    launching CPU op's kernels (CPU fallbacks ran on the host: no device event)."""
    next_id = max((e.id for e in events), default=0) + 1
    for op in ops:
        if op.event.fallback:
            continue
        start_us = op.start_ns / 1000
        duration_us = op.event.duration_ns / 1000
        device_event = FunctionEvent(
            id=op.cpu.id if op.cpu else next_id + op.seq, name=op.device_name, trace_name=op.device_name,
            overload_name=op.event.overload, thread=op.captured.core, start_us=start_us,
            end_us=start_us + duration_us, input_shapes=[list(s) for s in op.event.input_shapes],
            use_device=use_device, device_type=DeviceType.PrivateUse1, device_index=op.captured.core,
            stack=[], linked_correlation_id=op.cpu.id if op.cpu else 0,
        )
        events.append(device_event)
        if op.cpu is not None:
            op.cpu.append_kernel(op.device_name, op.captured.core, duration_us)
