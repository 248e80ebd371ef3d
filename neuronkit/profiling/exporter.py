"""`NeuronProfiler(config).export_trace`: the `on_trace_ready` handler of a Neuron profile (behaviour doc §6).

When a profiling window closes it takes the device events captured inside it, links them to the
framework ops (and, with `correlate_device_time`, adds them to the profiler's own events so
`key_averages()` shows device time), then writes the run directory: `trace.json` with a device track,
`op_events.parquet`, `op_summary.parquet` and, when a NEFF cache dir is known, the executed ops'
`neff_<key>_vnc_<core>.neff` files.
"""

from __future__ import annotations

import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch.profiler import ProfilerActivity

from neuronkit.profiling import tables
from neuronkit.profiling.capture import CAPTURE, select
from neuronkit.profiling.config import NeuronConfig, ProfileMode
from neuronkit.profiling.correlate import DeviceOp, attach, device_ops, link
from neuronkit.profiling.roofline import core_peaks
from neuronkit.profiling.trace import TRACE_NAME, run_directory, write_trace


@dataclass(frozen=True)
class ProfileExport:
    """What one export wrote, and the tables it wrote."""

    run_dir: Path
    trace_path: Path
    events_path: Path
    summary_path: Path
    events: pd.DataFrame
    summary: pd.DataFrame
    dropped_events: int
    window_s: float = 0.0  # how long the profiling window was open, host seconds


class NeuronProfiler:
    """Exports Neuron profiles for one `NeuronConfig`; `last` holds the most recent export."""

    def __init__(self, neuron_config: NeuronConfig) -> None:
        self.config = neuron_config
        self.last: ProfileExport | None = None

    def export_trace(self, prof: torch.profiler.profile) -> None:
        """`on_trace_ready` callback: correlate, then write the run directory."""
        ops, dropped = self._device_ops(prof)
        if dropped:
            warnings.warn(f"{dropped} device events beyond max_events_per_nc={self.config.max_events_per_nc} "
                          "were dropped from this profile", RuntimeWarning, stacklevel=2)
        if ops and not prof.profiler.experimental_config.trace_only:
            events = prof.events()
            link(ops, events)
            if self.config.correlate_device_time:
                attach(ops, events, prof.profiler.use_device)
        run_dir = run_directory(self.config.profile_output_dir)
        trace_path = run_dir / TRACE_NAME
        write_trace(prof, trace_path, ops, prof.profiler.kineto_results.trace_start_ns())
        events_frame = tables.events_frame(ops)
        summary = tables.summary_frame(events_frame)
        tables.write(events_frame, tables.EVENTS_SCHEMA, run_dir / tables.EVENTS_NAME)
        tables.write(summary, tables.SUMMARY_SCHEMA, run_dir / tables.SUMMARY_NAME)
        self._copy_neffs(ops, run_dir)
        window_s = (prof.profiler.profiling_end_time_ns - prof.profiler.profiling_start_time_ns) / 1e9
        self.last = ProfileExport(run_dir, trace_path, run_dir / tables.EVENTS_NAME, run_dir / tables.SUMMARY_NAME,
                                  events_frame, summary, dropped, window_s)

    def _device_ops(self, prof: torch.profiler.profile) -> tuple[list[DeviceOp], int]:
        """The window's captured events; none unless ProfilerActivity.PrivateUse1 was requested, since
        device activity is what that activity turns on (the real profiler needs both, §6)."""
        config = self.config
        if not config.captures_device:
            return [], 0
        captured = CAPTURE.take(prof.profiler.profiling_start_time_ns, prof.profiler.profiling_end_time_ns)
        if ProfilerActivity.PrivateUse1 not in prof.activities:
            return [], 0
        captured, dropped = select(captured, config.cores, config.max_events_per_nc)
        peaks = core_peaks(getattr(torch.neuron.get_device_properties(), "logical_nc_config", None))
        return device_ops(captured, prof.profiler.kineto_results.trace_start_ns(), peaks), dropped

    def _copy_neffs(self, ops: list[DeviceOp], run_dir: Path) -> None:
        """Copy each executed NEFF from the cache into the run dir, as the real profiler does on stop."""
        cache = self.config.neff_cache_dir
        if cache is None or ProfileMode.DEVICE not in self.config.modes:
            return
        for core, key in {(op.captured.core, op.event.cache_key) for op in ops if op.event.cache_key}:
            source = cache / key[:2] / key[2:4] / f"{key}.neff"
            if source.exists():
                shutil.copyfile(source, run_dir / f"neff_{key}_vnc_{core}.neff")
