"""`NeuronConfig` and `ProfileMode`: the Neuron extension of `torch.profiler.profile` (behaviour doc §6).

`NeuronConfig` subclasses `torch._C._profiler._ExperimentalConfig`, the type `experimental_config`
must have, so `torch.profiler.profile(experimental_config=NeuronConfig(...))` is accepted by PyTorch
itself as it is with the real torch_neuronx. While a config with a device mode is alive, the device
capture observes the simulated kernel (only while a PyTorch profiler records; see capture.py).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable
from pathlib import Path

from torch._C._profiler import _ExperimentalConfig

from neuronkit import env
from neuronkit.device.simulator.config import parse_core_list
from neuronkit.profiling.capture import CAPTURE


class ProfileMode(enum.Enum):
    """What a Neuron profile collects; the real runtime writes the files named here (§6)."""

    DEVICE = "device"  # NeuronCore instruction trace: .neff, .ntff
    RUNTIME = "runtime"  # Neuron Runtime system trace: trace_info.pb, ntrace.pb
    CPU_UTIL = "cpu_util"  # host CPU utilisation: cpu_util.pb
    HOST_MEMORY = "host_memory"  # host memory usage: host_mem.pb


_DEVICE_MODES = frozenset({ProfileMode.DEVICE, ProfileMode.RUNTIME})


class NeuronConfig(_ExperimentalConfig):
    """Neuron-specific settings for `torch.profiler.profile(experimental_config=...)`.

    Args:
        modes: `ProfileMode`s to enable; defaults to ``[DEVICE, RUNTIME]``. Device execution events are
            captured when either is on; CPU_UTIL and HOST_MEMORY are accepted and record nothing here.
        profile_output_dir: where `NeuronProfiler.export_trace` writes
            ``<instance-id>_pid_<pid>/<timestamp>/`` (defaults to ``./output``, the runtime's default).
        capture_enabled_for_nc: NeuronCores to capture, e.g. ``"0,1,2-5"``; None captures every core.
        correlate_device_time: attach each device execution to the framework op that launched it, so
            `key_averages()` reports device time (``self_privateuse1_time_total``).
        max_events_per_nc: cap on device events per NeuronCore and window; later ones are dropped, with a warning.
        neff_cache_dir: NEFF cache to copy the profiled ops' NEFFs from (default
            ``TORCH_NEURONX_NEFF_CACHE_DIR`` when set).
        precache_node_info: accepted for API parity; the simulator always has per-NEFF metadata at hand.
    """

    def __init__(
        self,
        modes: Iterable[ProfileMode] | None = None,
        profile_output_dir: str | os.PathLike = "./output",
        capture_enabled_for_nc: str | None = None,
        correlate_device_time: bool = False,
        max_events_per_nc: int | None = None,
        neff_cache_dir: str | os.PathLike | None = None,
        precache_node_info: bool = True,
    ) -> None:
        super().__init__()
        self.modes = list(modes) if modes is not None else [ProfileMode.DEVICE, ProfileMode.RUNTIME]
        unknown = [m for m in self.modes if not isinstance(m, ProfileMode)]
        if unknown:
            raise TypeError(f"modes must be ProfileMode values, got {unknown!r}")
        if max_events_per_nc is not None and max_events_per_nc < 0:
            raise ValueError(f"max_events_per_nc must be >= 0, got {max_events_per_nc}")
        self.profile_output_dir = Path(profile_output_dir)
        self.capture_enabled_for_nc = capture_enabled_for_nc
        self.correlate_device_time = correlate_device_time
        self.max_events_per_nc = max_events_per_nc
        cache = neff_cache_dir or env.text("TORCH_NEURONX_NEFF_CACHE_DIR")
        self.neff_cache_dir = Path(cache) if cache else None
        self.precache_node_info = precache_node_info
        self.cores = frozenset(parse_core_list(capture_enabled_for_nc)) if capture_enabled_for_nc else None
        self.captures_device = bool(_DEVICE_MODES.intersection(self.modes))
        if self.captures_device:
            CAPTURE.attach_for(self)

    def __repr__(self) -> str:
        modes = ", ".join(f"ProfileMode.{m.name}" for m in self.modes)
        return (f"NeuronConfig(modes=[{modes}], profile_output_dir={str(self.profile_output_dir)!r}, "
                f"capture_enabled_for_nc={self.capture_enabled_for_nc!r}, "
                f"correlate_device_time={self.correlate_device_time}, max_events_per_nc={self.max_events_per_nc}, "
                f"neff_cache_dir={str(self.neff_cache_dir) if self.neff_cache_dir else None!r}, "
                f"precache_node_info={self.precache_node_info})")
