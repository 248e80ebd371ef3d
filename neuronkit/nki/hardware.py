"""The NeuronCore figures NKI kernels are checked against, read from `neuronkit/data/nki_hardware.toml`."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from neuronkit import env
from neuronkit.resources import data_toml

TARGET_ENV = "NEURONKIT_NKI_TARGET"


@dataclass(frozen=True)
class Core:
    """One NeuronCore's on-chip memories and tile limits, as the interpreter enforces them."""

    target: str
    name: str
    partitions: int
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int
    pmax: int
    psum_fmax: int
    gemm_stationary_fmax: int
    gemm_moving_fmax: int
    bn_stats_fmax: int
    nc_version: int


@functools.cache
def core(target: str | None = None) -> Core:
    """The figures for `target` (default: $NEURONKIT_NKI_TARGET, else the data file's default, trn2)."""
    table = data_toml("nki_hardware.toml")
    target = target or env.text(TARGET_ENV) or table["default_target"]
    if target not in table:
        known = sorted(k for k, v in table.items() if isinstance(v, dict) and "core" in v)
        raise ValueError(f"unknown NKI target {target!r}; known targets: {', '.join(known)}")
    spec, tiles = table[target], table["tile_size"]
    return Core(target, spec["core"], spec["partitions"], spec["sbuf_bytes_per_partition"],
                spec["psum_bytes_per_partition"], tiles["pmax"], tiles["psum_fmax"],
                tiles["gemm_stationary_fmax"], tiles["gemm_moving_fmax"], tiles["bn_stats_fmax"],
                spec["nc_version"])
