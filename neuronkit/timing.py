"""Timing with the device synchronized around every sample: one call, or interleaved runs' medians.

Interleaving (A, B, A, B, ...) lets machine noise hit both variants alike; the median of several
samples discards the odd slow one (the same discipline as bench/bench_device.py)."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


def synchronize() -> None:
    """Wait for the neuron device (a no-op on the synchronous simulator, required on hardware)."""
    if hasattr(torch, "neuron"):
        torch.neuron.synchronize()


def clock() -> str:
    """What a time measured on this process's `neuron` device is: `host` (the simulated device runs on the
    host CPU, so its times are not Trainium's) or `trainium` (torch_neuronx on a Trainium device)."""
    from neuronkit.device.detect import decide

    return "trainium" if decide().kind == "real" else "host"


def interleaved_medians(fns: dict[str, Callable[[], object]], runs: int = 5, warmup: int = 1,
                        clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median milliseconds per call of each function, calls interleaved across the functions. `clock` may be
    `time.process_time` (this process's CPU time) to compare on a machine other jobs load."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            samples[name].append(timed(fn, clock)[1] * 1e3)
    return {name: statistics.median(values) for name, values in samples.items()}


def timed(fn: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> tuple[object, float]:
    """One call's result and its time in seconds on `clock`, wall time by default (e.g. a first call that compiles)."""
    synchronize()
    start = clock()
    result = fn()
    synchronize()
    return result, clock() - start
