"""The simulated machine, read from the same environment variables the real Neuron runtime reads.

Defaults describe a trn2.48xlarge: 16 Trainium2 chips, 8 physical NeuronCores and 96 GiB HBM each,
logical NeuronCore size (LNC) 2, so 64 logical cores of 24 GiB (behaviour doc §1: device count =
visible logical cores; default LNC=2 on trn2 → 64; `NEURON_RT_VISIBLE_CORES`, `NEURON_RT_NUM_CORES`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from neuronkit import env
from neuronkit.resources import data_toml

MAX_DEVICES = 128  # DeviceIndex is int8 in the real backend


@dataclass(frozen=True)
class SimConfig:
    """What the simulator pretends to be, resolved once at install time."""

    instance_family: str
    logical_nc_config: int
    device_count: int
    hbm_bytes_per_core: int
    strict: bool  # NEURONKIT_STRICT=1: CPU fallbacks raise instead of running on the host
    host_cc: bool  # NEURON_RT_ENABLE_HOST_CC=1: new streams get their own queue ids
    init_error: str = ""  # the runtime's initialization fails with this RuntimeError at first use

    @property
    def env(self) -> dict[str, str]:
        """The environment variables that shaped this configuration, as set."""
        return env.snapshot(ENV_VARS)


ENV_VARS = (
    "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "NEURON_LOGICAL_NC_CONFIG", "NEURON_RT_ENABLE_HOST_CC",
    "NEURONKIT_SIMULATOR", "NEURONKIT_INSTANCE_FAMILY", "NEURONKIT_HBM_PER_CORE", "NEURONKIT_STRICT",
    "TORCH_DEVICE_BACKEND_AUTOLOAD", "TORCH_NEURONX_NEFF_CACHE_DIR", "TORCH_NEURONX_NEFF_DISABLE_CACHE",
    "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION",
    "TORCH_NEURONX_SKIP_OP_PRECONDITIONS", "TORCH_NEURONX_ATEN_GMM_ALIGN",
    "TORCH_NEURONX_DISABLE_NEFF_CACHE", "NEURON_COMPILATION_CACHE_MAX_ENTRIES", "NEURON_COMPILATION_CACHE_MAX_SIZE_MB",
    "NEURONKIT_COMPILE_SHAPES",
)


def parse_core_list(spec: str) -> list[int]:
    """`0-3,6` -> [0, 1, 2, 3, 6], the syntax of NEURON_RT_VISIBLE_CORES."""
    cores: list[int] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise ValueError(f"NEURON_RT_VISIBLE_CORES: cannot parse {part!r} in {spec!r} (expected e.g. '0-3,6')")
        lo, hi = int(match[1]), int(match[2] or match[1])
        if hi < lo:
            raise ValueError(f"NEURON_RT_VISIBLE_CORES: empty range {part!r}")
        cores.extend(range(lo, hi + 1))
    return cores


def parse_bytes(spec: str) -> int:
    """`24GiB`, `512MiB`, `1e9` -> bytes."""
    match = re.fullmatch(r"\s*([\d.e+]+)\s*([KMGT]i?B?|B)?\s*", spec, re.IGNORECASE)
    if not match:
        raise ValueError(f"cannot parse a byte size from {spec!r} (expected e.g. '24GiB')")
    unit = (match[2] or "B").upper().rstrip("B").replace("I", "")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[unit]
    return int(float(match[1]) * scale)


@functools.cache
def instance_families() -> dict[str, tuple[int, int, int]]:
    """Per simulated instance family (`[families]` of neuronkit/data/trainium_hardware.toml): physical
    cores in the instance, HBM bytes per physical core, default LNC."""
    table = data_toml("trainium_hardware.toml")
    families = {}
    for name, entry in table["families"].items():
        figures = {**table["instances"][entry["instance"]], **entry} if "instance" in entry else entry
        physical = figures["chips"] * figures["physical_cores_per_chip"]
        families[name] = (physical, figures["hbm_bytes_per_chip"] // figures["physical_cores_per_chip"],
                          figures["default_logical_nc_config"])
    return families


def load_config() -> SimConfig:
    """Resolve the simulated machine from the environment."""
    family = env.text("NEURONKIT_INSTANCE_FAMILY", "trn2")
    families = instance_families()
    if family not in families:
        raise RuntimeError(f"Unknown Neuron instance family {family!r}; simulated families: {sorted(families)}")
    physical, hbm_per_physical, default_lnc = families[family]
    lnc = env.whole("NEURON_LOGICAL_NC_CONFIG", default_lnc)
    if lnc not in (1, 2):
        raise RuntimeError(f"NEURON_LOGICAL_NC_CONFIG must be 1 or 2, got {lnc}")
    available = physical // lnc
    count = available
    init_error = ""
    if visible := env.text("NEURON_RT_VISIBLE_CORES"):
        cores = parse_core_list(visible)
        if any(c >= available for c in cores):  # the device registers; its runtime fails to initialize
            init_error = (f"Neuron runtime initialization failed: NEURON_RT_VISIBLE_CORES={visible} names cores "
                          f"beyond the {available} available on this {family} instance")
        count = len(cores)
    if (num := env.whole("NEURON_RT_NUM_CORES", 0)) > 0:
        count = min(count, num)
    if count >= MAX_DEVICES + 1:
        raise RuntimeError(f"{count} visible Neuron devices exceed {MAX_DEVICES}; reduce them with "
                           "NEURON_RT_NUM_CORES or NEURON_RT_VISIBLE_CORES")
    hbm = hbm_per_physical * lnc
    if override := env.text("NEURONKIT_HBM_PER_CORE"):
        hbm = parse_bytes(override)
    return SimConfig(
        instance_family=family,
        logical_nc_config=lnc,
        device_count=count,
        hbm_bytes_per_core=hbm,
        strict=env.flag("NEURONKIT_STRICT"),
        host_cc=env.flag("NEURON_RT_ENABLE_HOST_CC"),
        init_error=init_error,
    )
