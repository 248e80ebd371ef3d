"""Trainium instances as the parallel planner sees them: logical cores, HBM per core, link bandwidths.

Figures come from `neuronkit/data/trainium_hardware.toml` (`[instances.*]`, each with its source). They are
vendor peak numbers; what the planner derives from them is labelled an estimate.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass

from neuronkit.errors import NeuronkitInputError
from neuronkit.resources import data_dir


@dataclass(frozen=True, slots=True)
class Instance:
    """One instance type at its default logical-core size (LNC)."""

    name: str
    cores: int  # logical NeuronCores: what `torch.neuron.device_count()` reports
    cores_per_chip: int
    hbm_bytes_per_core: int
    neuronlink_bytes_per_s_per_core: float  # chip-to-chip, shared by the chip's cores
    efa_bytes_per_s_per_core: float  # across instances, shared by all the instance's cores
    source: str


@functools.lru_cache(maxsize=None)
def instances() -> dict[str, Instance]:
    """Every instance type the hardware table describes, by name."""
    with (data_dir() / "trainium_hardware.toml").open("rb") as fh:
        table = tomllib.load(fh)["instances"]
    found = {}
    for name, spec in table.items():
        per_chip = spec["physical_cores_per_chip"] // spec["default_logical_nc_config"]
        cores = spec["chips"] * per_chip
        found[name] = Instance(
            name=name, cores=cores, cores_per_chip=per_chip,
            hbm_bytes_per_core=spec["hbm_bytes_per_chip"] // per_chip,
            neuronlink_bytes_per_s_per_core=spec["neuronlink_bytes_per_s_per_chip"] / per_chip,
            efa_bytes_per_s_per_core=spec["efa_bits_per_s"] / 8 / cores,
            source=spec["source"])
    return found


def instance(name: str) -> Instance:
    """The named instance type, or a one-line error listing the known ones."""
    known = instances()
    if name not in known:
        raise NeuronkitInputError(f"unknown instance {name!r}; known: {', '.join(sorted(known))}")
    return known[name]
