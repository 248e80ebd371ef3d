"""`profile()` on Trainium: the same call, through the real torch-neuronx's documented profiling recipe.

When the real backend owns `neuron` (neuronkit steps aside), nothing of the simulator exists: this module
uses only public APIs. `torch_neuronx.profiling`'s `NeuronConfig`, `ProfileMode` and `NeuronProfiler` in
the documented recipe (behaviour doc §6: `torch.profiler.profile(activities=[CPU, PrivateUse1],
experimental_config=NeuronConfig(...), on_trace_ready=NeuronProfiler(config).export_trace)`), PyTorch's
`key_averages()` for the per-op table (device time as the backend's profiler plugin reports it under
PrivateUse1), and `torch_neuronx.get_fallback_ops()` for which ops ran on the host. The device's own
profile (NEFF, NTFF, system trace) is written by torch-neuronx under `output_dir`; open it in Neuron
Explorer. Roofline estimates and NKI estimates are the simulator's and are null here.
"""

from __future__ import annotations

import importlib
import os
import statistics
from typing import Any, Callable

import pandas as pd
import torch
from torch.profiler import ProfilerActivity

from neuronkit.policy import CPU_FALLBACK, NATIVE
from neuronkit.profiling.roofline import core_peaks

# The columns profile() returns here: the summary's that PyTorch's aggregation can fill; the estimates null.
COLUMNS = ["name", "classification", "calls", "device_time_us", "cpu_time_us", "est_trn2_us", "bound",
           "nki_est_us"]


def profile(run: Callable[[], Any], steps: int, warmup: int, output_dir: str | os.PathLike,
            record_shapes: bool, timed_ms: Callable[[Callable[[], Any]], float]) -> pd.DataFrame:
    """Warm up, time `steps` plain iterations of `run`, then profile `steps` more with the real backend's
    documented recipe; the per-op table from `key_averages()`, hottest device time first, with the same
    `attrs` as the simulated profile (paths the real profiler chose are not known here: null)."""
    profiling = importlib.import_module("torch_neuronx.profiling")
    config = profiling.NeuronConfig(modes=[profiling.ProfileMode.DEVICE, profiling.ProfileMode.RUNTIME],
                                    profile_output_dir=str(output_dir))
    with torch.no_grad():
        for _ in range(warmup):
            run()
        plain = [timed_ms(run) for _ in range(steps)]
        with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                    record_shapes=record_shapes, experimental_config=config,
                                    on_trace_ready=profiling.NeuronProfiler(config).export_trace) as prof:
            profiled = [timed_ms(run) for _ in range(steps)]
    summary = _summary(prof.key_averages(), _fallback_ops())
    plain_ms, profiled_ms = statistics.median(plain), statistics.median(profiled)
    peaks = core_peaks()
    summary.attrs = {
        "trace_path": None, "parquet_path": None, "summary_path": None, "run_dir": str(output_dir),
        "overhead": {"profiled_ms": profiled_ms, "plain_ms": plain_ms, "ratio": profiled_ms / plain_ms},
        "fallbacks": [{"name": r.name, "calls": int(r.calls), "bytes_copied": 0}
                      for r in summary[summary["classification"] == CPU_FALLBACK].itertuples()],
        "events": int(summary["calls"].sum()), "steps": steps, "warmup": warmup,
        "hardware": {"chip": peaks.chip, "logical_nc_config": peaks.logical_nc_config,
                     "bf16_flops_per_s": peaks.flops_per_s["bf16"], "hbm_bytes_per_s": peaks.hbm_bytes_per_s,
                     "source": peaks.source, "note": "no roofline estimate on the real backend: its device "
                                                     "profile is in output_dir (Neuron Explorer)"},
    }
    return summary


def _fallback_ops() -> set[str]:
    """The ops torch-neuronx ran on the host so far (`torch_neuronx.get_fallback_ops()`, named `aten::<name>`
    plus any overload: S NeuronBindings.cpp:981-986), as the profiler names them (no overload)."""
    names = importlib.import_module("torch_neuronx").get_fallback_ops()
    return {name.split(".", 1)[0] for name in names}


def _summary(averages: Any, fallbacks: set[str]) -> pd.DataFrame:
    """One row per ATen op PyTorch's profiler aggregated, in `COLUMNS`, hottest device time first."""
    rows = [{"name": e.key, "classification": CPU_FALLBACK if e.key in fallbacks else NATIVE, "calls": e.count,
             "device_time_us": float(e.self_device_time_total), "cpu_time_us": float(e.cpu_time_total),
             "est_trn2_us": None, "bound": None, "nki_est_us": None}
            for e in averages if e.key.startswith("aten::")]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.sort_values(["device_time_us", "cpu_time_us"], ascending=False, kind="stable").reset_index(drop=True)
