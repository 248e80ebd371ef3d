"""Profiling on the neuron device: `torch_neuronx.profiling`'s API, simulated (behaviour doc §6).

While simulating, `from torch_neuronx.profiling import NeuronConfig, ProfileMode, NeuronProfiler`
resolves here (neuronkit/device/simulator/shim.py), so the documented recipe runs unchanged::

    nc = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir=OUTPUT_DIR,
                      capture_enabled_for_nc="0", correlate_device_time=True)
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                experimental_config=nc, on_trace_ready=NeuronProfiler(nc).export_trace) as prof:
        ...
    print(prof.key_averages().table(sort_by="self_privateuse1_time_total", row_limit=4))

How device time gets into `key_averages()` (there is no Kineto plugin, so PyTorch alone reports 0):

1. `NeuronConfig` subclasses `torch._C._profiler._ExperimentalConfig`, the type `experimental_config`
   requires; while one is alive, a process-wide capture sits in the simulated kernel's
   `profiler_observers`. The kernel calls those only while the profiler records, with an `OpEvent` per
   op: its measured execution, NEFF cache key, shapes, dtypes and bytes.
2. `NeuronProfiler.export_trace`, the `on_trace_ready` handler, runs when the window closes. It links
   each captured execution to the CPU op that launched it (same name, largest time overlap on Kineto's
   clock) and, with `correlate_device_time=True`, appends a `DeviceType.PrivateUse1` `FunctionEvent`
   per device execution to the profiler's events and its duration to the CPU op's `kernels`: the
   structure a CUDA or Neuron Kineto plugin produces. PyTorch's own aggregation then reports it.
   CPU fallbacks ran on the host, so they get no device event; they are marked with their copied bytes.
3. It writes `<profile_output_dir>/<instance-id>_pid_<pid>/<timestamp>/` with `trace.json` (PyTorch's
   trace plus a device track) and the Parquet tables, with a Trainium2 roofline estimate per op.

Without `on_trace_ready=NeuronProfiler(nc).export_trace` nothing is attached (the table stays CPU-only);
that handler is part of the documented recipe. `profile()` wraps all of it for the workbook.
See docs/profiling.md.
"""

from neuronkit.profiling.api import HIGH_OVERHEAD, profile
from neuronkit.profiling.config import NeuronConfig, ProfileMode
from neuronkit.profiling.exporter import NeuronProfiler, ProfileExport

__all__ = ["HIGH_OVERHEAD", "NeuronConfig", "NeuronProfiler", "ProfileExport", "ProfileMode", "profile"]
