"""`profile(model, inputs)`: the workbook's one call for device hot spots, a trace and Parquet tables.

It follows the documented discipline (behaviour doc §6; torchtitan's profiler, gpt-fast's timing): warm
up first (≥3 iterations, outside the profiler, so first-call NEFF compilation never pollutes the
result), time `steps` plain iterations bracketed by `torch.neuron.synchronize()`, then profile `steps`
more with `NeuronConfig` + `NeuronProfiler(...).export_trace`, timing each the same way, so the
profiler's overhead is reported next to its results.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import statistics
import tempfile
import warnings
from typing import Any, Callable

import pandas as pd
import torch
from torch.profiler import ProfilerActivity

from neuronkit.calling import call
from neuronkit.device.simulator.registration import installed
from neuronkit.policy import CPU_FALLBACK
from neuronkit.profiling.capture import track_modules
from neuronkit.profiling.config import NeuronConfig, ProfileMode
from neuronkit.profiling import real
from neuronkit.profiling.exporter import NeuronProfiler, ProfileExport
from neuronkit.profiling.markers import without_trace_markers
from neuronkit.profiling.roofline import core_peaks
from neuronkit.timing import timed

RECOMMENDED_WARMUP = 3
# A profiled step this many times the plain one or more: the profiler's own work inflates every op's time,
# so the profile's times say which ops dominate (their shares), not how long each takes.
HIGH_OVERHEAD = 1.5


def profile(model: torch.nn.Module, inputs: Any, steps: int = 5, warmup: int = RECOMMENDED_WARMUP, *,
            output_dir: str | os.PathLike | None = None, record_shapes: bool = True) -> pd.DataFrame:
    """Profile `steps` forward passes of `model` on the neuron device, after `warmup` unprofiled ones.

    On the simulated device the summary is built from the simulator's device capture; with the real
    torch-neuronx (the simulator steps aside) `neuronkit.profiling.real` runs the documented recipe with
    public APIs only: the same columns where PyTorch's aggregation fills them, estimates and paths null.

    Args:
        model: a module whose parameters are on the neuron device; run under `torch.no_grad()`.
        inputs: a mapping (keyword arguments), a tuple (positional arguments) or a single tensor.
        steps: profiled iterations (and as many plain, timed iterations before them).
        warmup: iterations run before any timing or profiling; fewer than 3 warns (the docs ask ≥3).
        output_dir: `profile_output_dir` for the run directory; a new temporary directory by default.
        record_shapes: passed to `torch.profiler.profile`.

    Returns:
        The per-op summary (docs/profiling.md), hottest device time first. `attrs` holds
        `trace_path`, `parquet_path` (op events), `summary_path`, `run_dir`, `overhead`
        (`profiled_ms`, `plain_ms`, `ratio`: median step times; `reading`: `high` at HIGH_OVERHEAD or
        more, else `low`), `est_trn2_step_us` (every op's roofline estimate summed per step), `fallbacks` (`name`, `calls`,
        `bytes_copied`), `host_transfers` (the same for native ops with host work inside: a host sync or a
        round trip, neuronkit/data/op_support.toml), `events` (op events profiled), `steps`, `warmup` and `hardware` (the
        roofline's peaks and their source).

    Example:
        >>> top = neuronkit.profiling.profile(model, {"input_ids": ids}, steps=3)  # doctest: +SKIP
        >>> top[["name", "calls", "device_time_us", "est_trn2_us", "bound"]].head()  # doctest: +SKIP
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if warmup < RECOMMENDED_WARMUP:
        warnings.warn(f"warmup={warmup}: profile after at least {RECOMMENDED_WARMUP} warm-up iterations, or "
                      "first-call compilation shows up in the measurements", UserWarning, stacklevel=2)
    run = functools.partial(call, model, inputs)
    if not installed():  # the real backend owns `neuron`, or there is no device at all
        if importlib.util.find_spec("torch_neuronx") is None:
            raise RuntimeError("neuronkit.profile needs a neuron device: the simulator is off in this process "
                               "(NEURONKIT_SIMULATOR=0?) and torch_neuronx is not installed")
        return real.profile(run, steps, warmup, output_dir or tempfile.mkdtemp(prefix="neuronkit-profile-"),
                            record_shapes, _timed_ms)
    config = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], correlate_device_time=True,
                          profile_output_dir=output_dir or tempfile.mkdtemp(prefix="neuronkit-profile-"))
    exporter = NeuronProfiler(config)
    with torch.no_grad():
        for _ in range(warmup):
            run()
        plain = [_timed_ms(run) for _ in range(steps)]
        with without_trace_markers(), track_modules(), torch.profiler.profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], record_shapes=record_shapes,
                experimental_config=config, on_trace_ready=exporter.export_trace):
            profiled = [_timed_ms(run) for _ in range(steps)]
    export = exporter.last
    if export.events.empty:
        warnings.warn("no op ran on the neuron device while profiling: move the model and inputs there first "
                      "(model.to('neuron'))", UserWarning, stacklevel=2)
    return _summary(export, statistics.median(plain), statistics.median(profiled), steps, warmup)


def from_export(model: torch.nn.Module, inputs: Any, export: ProfileExport, steps: int) -> pd.DataFrame:
    """`profile`'s summary for a profile the caller already took and exported (`NeuronProfiler(...).last`)
    of `steps` forward passes of `model` on `inputs`, after its own warm-up: nothing is profiled again. The
    overhead compares the profile's window over its `steps` (a mean) with the median of `steps` plain
    passes timed now; `warmup` in the attrs is None (the caller's). Its Parquet events have no
    `module_path` (only `profile` tracks modules)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    run = functools.partial(call, model, inputs)
    with torch.no_grad():
        plain = [_timed_ms(run) for _ in range(steps)]
    return _summary(export, statistics.median(plain), export.window_s * 1000 / steps, steps, None)


def _summary(export: ProfileExport, plain_ms: float, profiled_ms: float, steps: int,
             warmup: int | None) -> pd.DataFrame:
    """The export's per-op summary with what `profile` documents in its attrs."""
    summary = export.summary.copy()
    fallbacks = summary[summary["classification"] == CPU_FALLBACK]
    peaks = core_peaks(getattr(torch.neuron.get_device_properties(), "logical_nc_config", None))
    summary.attrs = {
        "trace_path": str(export.trace_path), "parquet_path": str(export.events_path),
        "summary_path": str(export.summary_path), "run_dir": str(export.run_dir),
        "overhead": {"profiled_ms": profiled_ms, "plain_ms": plain_ms, "ratio": profiled_ms / plain_ms,
                     "reading": "high" if profiled_ms / plain_ms >= HIGH_OVERHEAD else "low"},
        "est_trn2_step_us": float(summary["est_trn2_us"].sum()) / steps if len(summary) else None,
        "fallbacks": [{"name": r.name, "calls": int(r.calls), "bytes_copied": int(r.fallback_bytes)}
                      for r in fallbacks.itertuples()],
        "host_transfers": [{"name": r.name, "calls": int(r.host_transfers), "bytes_copied": int(r.host_bytes)}
                           for r in summary[summary["host_transfers"] > 0].itertuples()],
        "events": len(export.events), "steps": steps, "warmup": warmup,
        "hardware": {"chip": peaks.chip, "logical_nc_config": peaks.logical_nc_config,
                     "bf16_flops_per_s": peaks.flops_per_s["bf16"], "hbm_bytes_per_s": peaks.hbm_bytes_per_s,
                     "source": peaks.source, "note": "roofline estimate from published peaks, not a measurement"},
    }
    return summary


def _timed_ms(run: Callable[[], Any]) -> float:
    """Milliseconds for one iteration, bracketed by device synchronisation (gpt-fast's discipline)."""
    return timed(run)[1] * 1000

