"""The instance catalogue: Trainium (and Inferentia2) instances as the planner and the cost model see them.

Figures come from `neuronkit/data/trainium_hardware.toml`: chips (dense peak FLOP/s per dtype, HBM
bandwidth), instances (chips, HBM, NeuronLink and EFA bandwidth, hourly prices), each figure citing its
source and the date it was retrieved. They are vendor peaks and list prices; what is derived from them is
labelled an estimate. An instance's logical NeuronCores are its chips' physical cores grouped by the default
logical-core size (LNC), which is what `torch.neuron.device_count()` reports and what one rank drives.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from neuronkit.errors import NeuronkitInputError
from neuronkit.resources import data_toml

PRICE_KINDS = ("on_demand", "reserved")
# Peak keys of the chip tables by compute dtype; anything else computes at the FP32 peak.
_PEAK_KEY = {"bfloat16": "bf16", "float16": "fp16", "float8": "fp8", "float32": "fp32"}


@dataclass(frozen=True, slots=True)
class Source:
    """Where a figure was read, and when."""

    key: str
    title: str
    url: str
    file: str
    retrieved: str
    note: str = ""

    def cite(self) -> str:
        return f"{self.url} (retrieved {self.retrieved})"


@dataclass(frozen=True, slots=True)
class Price:
    """An hourly price AWS published for an instance."""

    kind: str  # on_demand or reserved (the Neuron docs' "RI-Effective hourly rate")
    usd_per_hour: float
    source: Source

    def describe(self) -> str:
        what = "on-demand" if self.kind == "on_demand" else "reserved (RI-effective)"
        return f"${self.usd_per_hour:,.3f}/h {what}, {self.source.cite()}"


@dataclass(frozen=True, slots=True)
class Instance:
    """One instance type at its default logical-core size (LNC)."""

    name: str
    chip: str  # trn1, trn2, trn3, inf2
    chip_name: str  # Trainium2, ...
    chips: int
    cores: int  # logical NeuronCores: what `torch.neuron.device_count()` reports
    cores_per_chip: int
    logical_nc_config: int
    hbm_bytes_per_core: int
    hbm_bytes_per_s_per_core: float
    peak_flops_per_core: dict[str, float]  # dense, by peak key: bf16, fp16, fp8, fp32
    neuronlink_bytes_per_s_per_core: float  # chip-to-chip, shared by the chip's cores (0: one chip, no link)
    efa_bytes_per_s_per_core: float  # across instances, shared by all the instance's cores (0: none published)
    ultraserver_instances: int  # instances sharing one NeuronLink domain (4 for trn2u), else 1
    neuronlink_inter_bytes_per_s_per_core: float  # between the instances of an UltraServer
    serving_only: bool
    prices: dict[str, Price]
    source: str  # the instance table's URL
    sources: dict[str, Source] = field(default_factory=dict)  # by figure
    missing: str = ""

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s of one logical core for a compute dtype (`bfloat16`, `float32`, ...)."""
        return self.peak_flops_per_core[_PEAK_KEY.get(dtype.removeprefix("torch."), "fp32")]

    def price(self, kind: str = "on_demand") -> Price | None:
        """The published hourly price of `kind`, or None when AWS publishes none we could find."""
        return self.prices.get(kind)


@functools.lru_cache(maxsize=None)
def _table() -> dict[str, Any]:
    return data_toml("trainium_hardware.toml")


@functools.lru_cache(maxsize=None)
def sources() -> dict[str, Source]:
    """Every source the catalogue cites, by key."""
    return {key: Source(key=key, **spec) for key, spec in _table()["sources"].items()}


@functools.lru_cache(maxsize=None)
def instances() -> dict[str, Instance]:
    """Every instance type the catalogue describes, by name."""
    table, known = _table(), sources()
    found = {}
    for name, spec in table["instances"].items():
        chip = table["chips"][spec["chip"]]
        cited = {figure: known[key] for figure, key in {**chip["cite"], **spec["cite"]}.items()}
        lnc = spec["default_logical_nc_config"]
        per_chip = spec["physical_cores_per_chip"] // lnc
        cores = spec["chips"] * per_chip
        share = lnc / chip["physical_cores_per_chip"]  # one logical core's part of a chip
        prices = {kind: Price(kind, usd, cited[f"usd_per_hour.{kind}"])
                  for kind, usd in spec.get("usd_per_hour", {}).items()}
        found[name] = Instance(
            name=name, chip=spec["chip"], chip_name=chip["chip"], chips=spec["chips"], cores=cores,
            cores_per_chip=per_chip, logical_nc_config=lnc,
            hbm_bytes_per_core=spec["hbm_bytes_per_chip"] // per_chip,
            hbm_bytes_per_s_per_core=chip["hbm_bytes_per_s"] * share,
            peak_flops_per_core={k: v * 1e12 * share for k, v in chip["dense_tflops"].items()},
            neuronlink_bytes_per_s_per_core=spec.get("neuronlink_bytes_per_s_per_chip", 0) / per_chip,
            efa_bytes_per_s_per_core=spec.get("efa_bits_per_s", 0) / 8 / cores,
            ultraserver_instances=spec.get("ultraserver_instances", 1),
            neuronlink_inter_bytes_per_s_per_core=spec.get("neuronlink_inter_bytes_per_s_per_chip", 0) / per_chip,
            serving_only=spec.get("serving_only", False), prices=prices, source=cited["chips"].url,
            sources=cited, missing=spec.get("missing", ""))
    return found


def instance(name: str) -> Instance:
    """The named instance type, or a one-line error listing the known ones."""
    known = instances()
    if name not in known:
        raise NeuronkitInputError(f"unknown instance {name!r}; known: {', '.join(sorted(known))}")
    return known[name]
