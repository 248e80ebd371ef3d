"""Which `neuron` device this process has: real Trainium, the simulator, or none — and why.

Ordered like huggingface/kernels' backend detection: an explicit opt-out first, then the real
torch_neuronx (it owns PyTorch's PrivateUse1 slot, which can be claimed only once per process), then
the simulator. The real backend is "real" only with a Neuron device node (`/dev/neuron0`, as its own
test harness checks; behaviour doc §1).
"""

from __future__ import annotations

import argparse
import glob
import importlib
import importlib.machinery
import importlib.util
import json
import platform
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import neuronkit
from _neuronkit_nki import is_placeholder
from neuronkit import env
import neuronkit.device.torch_builds as torch_builds
from neuronkit.device.simulator.config import ENV_VARS


@dataclass
class Probe:
    """What detection looks at; tests replace these with stand-ins for the real backend."""

    find_spec: Callable[[str], Any] = importlib.util.find_spec
    find_on_path: Callable[[str], Any] = importlib.machinery.PathFinder.find_spec  # installed, not imported
    device_nodes: Callable[[], list[str]] = lambda: sorted(glob.glob("/dev/neuron[0-9]*"))
    import_module: Callable[[str], Any] = importlib.import_module


@dataclass
class Decision:
    kind: str  # "real" | "simulated" | "none"
    reason: str


# PyPI holds placeholders under the Neuron package names: their import raises ("WRONG PACKAGE"). The real
# packages come from Neuron's own index.
NEURON_INDEX = "https://pip.repos.neuron.amazonaws.com"
# Why the autoload could not install the simulated device in this process (one line; neuronkit/device/__init__.py
# sets it), for `neuronkit detect`.
autoload_failure: str | None = None
PLACEHOLDER_MODULES = {"torch_neuronx": "torch-neuronx", "neuronxcc": "neuronx-cc", "nki": "nki"}


def placeholder(module: str, probe: "Probe | None" = None) -> str | None:
    """One line saying that `module` is PyPI's placeholder and where the real package comes from, or
    None. Read from the module's source without importing it (its import raises)."""
    spec = (probe or Probe()).find_on_path(module)
    if not is_placeholder(getattr(spec, "origin", None)):
        return None
    package = PLACEHOLDER_MODULES.get(module, module)
    return (f"{module} here is PyPI's placeholder for {package} (its import raises WRONG PACKAGE): the real "
            f"package comes from the Neuron index, pip install --extra-index-url={NEURON_INDEX} {package}")


@dataclass
class DeviceReport:
    """The answer of `neuronkit.detect()`."""

    kind: str
    reason: str
    device_count: int = 0
    instance_family: str | None = None
    hbm_bytes_per_core: int | None = None
    logical_nc_config: int | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    device_nodes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        lines = [f"neuron device: {self.kind} — {self.reason}"]
        if self.device_count:
            lines.append(f"  {self.device_count} logical NeuronCore(s), instance family {self.instance_family}, "
                         f"{(self.hbm_bytes_per_core or 0) / 2**30:.1f} GiB HBM per core, LNC={self.logical_nc_config}")
        lines.append("  versions: " + ", ".join(f"{k} {v}" for k, v in self.versions.items() if v))
        lines.extend(f"  note: {note}" for note in self.notes)
        if self.env:
            lines.append("  environment: " + ", ".join(f"{k}={v}" for k, v in sorted(self.env.items())))
        return "\n".join(lines)


def _is_shim(spec: Any) -> bool:
    module = sys.modules.get("torch_neuronx")
    return module is not None and getattr(module, "__neuronkit_simulated__", False) and spec is module.__spec__


def decide(probe: Probe | None = None) -> Decision:
    """The ordered decision, without importing or initializing any device."""
    probe = probe or Probe()
    if env.raw("NEURONKIT_SIMULATOR") == "0":
        return Decision("none", "the simulator is switched off (NEURONKIT_SIMULATOR=0) and no real backend is loaded")
    spec = probe.find_spec("torch_neuronx")
    if spec is not None and not _is_shim(spec) and placeholder("torch_neuronx", probe):
        return Decision("simulated", "the installed torch_neuronx is PyPI's placeholder, not TorchNeuron: neuronkit "
                                     "simulates a Trainium device on the CPU")
    if spec is not None and not _is_shim(spec):
        if probe.device_nodes():
            return Decision("real", "torch_neuronx is installed and a Neuron device node is present")
        return Decision("none", "torch_neuronx is installed but no Neuron device (/dev/neuron*) is present; the real "
                                "package owns the `neuron` device, so neuronkit does not simulate it. Check that you "
                                "are on a Trn2/Trn3 instance and run `neuron-ls`.")
    return Decision("simulated", "no torch_neuronx installation: neuronkit simulates a Trainium device on the CPU")


def detect(probe: Probe | None = None) -> DeviceReport:
    """Report the `neuron` device this process has (real / simulated / none), with the reason, versions,
    core count, instance family and the environment variables in effect."""
    probe = probe or Probe()
    decision = decide(probe)
    import torch

    versions: dict[str, str | None] = {"python": platform.python_version(), "torch": torch.__version__,
                                       "neuronkit": neuronkit.__version__}
    notes = [note for module in PLACEHOLDER_MODULES if (note := placeholder(module, probe))]
    notes += [note for package in ("torchvision", "torchaudio")
              if (note := torch_builds.mismatch(package, torch.__version__, torch.version.cuda))]
    for package in ("torchvision", "torchaudio", "transformers", "accelerate", "torch_neuronx"):
        versions[package] = None if placeholder(package, probe) else _version(package, probe)
    report = DeviceReport(decision.kind, decision.reason, versions=versions,
                          env=env.snapshot(ENV_VARS),
                          device_nodes=probe.device_nodes(), notes=notes)
    device_module = _device_module(probe, decision)
    if decision.kind == "simulated" and device_module is None:
        report.kind, report.reason = "none", autoload_failure or (
            "the simulator is not loaded in this process (PyTorch's backend autoload is off: "
            "TORCH_DEVICE_BACKEND_AUTOLOAD=0?)")
    if device_module is not None and report.kind != "none":
        report.device_count = device_module.device_count()
        if report.device_count:
            props = device_module.get_device_properties(0)
            report.instance_family = getattr(props, "name", None)
            report.hbm_bytes_per_core = getattr(props, "total_memory", None)
            report.logical_nc_config = getattr(props, "logical_nc_config", None)
    return report


def _device_module(probe: Probe, decision: Decision) -> Any:
    if decision.kind == "real":
        return probe.import_module("torch_neuronx").neuron if hasattr(
            probe.import_module("torch_neuronx"), "neuron") else probe.import_module("torch").neuron
    import torch

    return getattr(torch, "neuron", None) if decision.kind == "simulated" else None


def _version(package: str, probe: Probe) -> str | None:
    if probe.find_spec(package) is None:
        return None
    if package == "torch_neuronx":  # the module knows whether it is the real one or neuronkit's shim
        return getattr(probe.import_module(package), "__version__", None)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    report = detect()
    print(json.dumps(report.to_dict(), indent=2) if args.json else report)
    return 0
