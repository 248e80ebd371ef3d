"""The profiling stage's record: where device time goes, per op."""

from __future__ import annotations

from dataclasses import dataclass

from neuronkit.evidence import ModelSlice, fact


@dataclass
class TopOp:
    """One op of the profile, by device time."""

    name: str = fact("Op", default="")
    calls: int = fact("Calls", "count", default=0)
    device_time_us: float = fact("Device time", "µs", default=0.0)
    cpu_time_us: float = fact("Host time", "µs", default=0.0)
    classification: str = fact("Classification", default="")
    est_trn2_us: float | None = fact("Roofline estimate on trn2", "µs", "ESTIMATE from the op's FLOPs and bytes and "
                                     "trn2's published peaks (neuronkit/data/trainium_hardware.toml)", estimate=True)
    bound: str | None = fact("Bound by")
    nki_est_us: float | None = fact("NKI engine time (estimate)", "µs", "an NKI kernel's estimated engine time on "
                                    "trn2 from the instructions it ran, beside its host time (neuronkit/nki/cost.py)",
                                    estimate=True)


@dataclass
class ProfilerOverhead:
    """Step time with and without the profiler: medians (the profiled one is the window's mean over its
    steps when the stage kept the notebook's profile)."""

    profiled_ms: float = fact("Profiled step", "ms", default=0.0)
    plain_ms: float = fact("Plain step (the overhead's baseline)", "ms", "timed beside the profiled steps to "
                           "measure the overhead; the run's forward time is the compile stage's", default=0.0)
    ratio: float = fact("Overhead", "×", default=0.0)
    reading: str = fact("Reading", doc="what the overhead means for the profile's times: `low`, or `high` (above "
                        "neuronkit.profiling.HIGH_OVERHEAD: each op's time is inflated, compare ops by share)",
                        default="")


@dataclass
class ProfiledFallback:
    """An op the profiler saw falling back to the CPU."""

    name: str = fact("Op", default="")
    calls: int = fact("Calls", "count", default=0)
    bytes_copied: int = fact("Bytes copied", "bytes", default=0)


@dataclass
class RooflineHardware:
    """The peaks the profile's roofline estimates divide by (neuronkit/data/trainium_hardware.toml)."""

    chip: str = fact("Chip", default="")
    logical_nc_config: int = fact("Logical NeuronCore config", doc="physical cores per logical core", default=0)
    bf16_flops_per_s: float = fact("bf16 peak", doc="FLOP/s of one logical core", default=0.0)
    hbm_bytes_per_s: float = fact("HBM bandwidth", doc="bytes/s of one logical core", default=0.0)
    source: str = fact("Source of the peaks", default="")
    note: str = fact("Note", default="")


@dataclass
class ProfileEvidence:
    """Stage 05: where device time goes, per op (NeuronConfig + NeuronProfiler)."""

    top_ops: list[TopOp] = fact("Top ops by device time", factory=list)
    distinct_ops: int = fact("Distinct ops", "count", default=0)
    fallbacks: list[ProfiledFallback] = fact("CPU fallbacks", factory=list)
    overhead: ProfilerOverhead = fact("Profiler overhead", factory=ProfilerOverhead)
    trace_path: str | None = fact("Chrome trace (open in Perfetto)")
    parquet_path: str | None = fact("Parquet export")
    summary_path: str | None = fact("Summary table")
    hardware: RooflineHardware = fact("Roofline hardware", factory=RooflineHardware)
    est_trn2_step_us: float | None = fact("Estimated forward on trn2 (roofline)", "µs",
                                          "ESTIMATE: every op's roofline time on one trn2 NeuronCore summed per "
                                          "step (`hardware` names the peaks' source); no launch, host or fallback "
                                          "cost", estimate=True)
    model_slice: ModelSlice | None = fact("Ran on", doc="the full model or a layer slice of it")
    profiled_by_caller: bool = fact("Profiled by the notebook's cell", doc="the stage kept the profile the "
                                    "notebook took rather than taking another", default=False)
