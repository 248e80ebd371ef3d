"""Whether the installed torchvision and torchaudio pair with the running torch, read without importing them.

A torchvision built for another torch, or a CUDA build beside a CPU torch, cannot load its C++ ops:
`import torchvision` dies with "operator torchvision::nms does not exist", and transformers, which imports
torchvision when it is installed, fails with it (`pipeline`, `from_pretrained`). That is what `pip install
timm` does beside a CPU torch 2.13: PyPI's torchvision 0.28.0 is a CUDA build (`+cu130`). `neuronkit detect`
names it in one line with the fix (detect.py).
"""

from __future__ import annotations

import importlib.util
import re
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

from neuronkit.device.simulator.native_build import torch_release

# PyTorch's CPU wheel index: the CPU builds of torch, torchvision and torchaudio (`make setup` uses it when pip
# finds no CPU torch of its own; the Makefile's TORCH_CPU_INDEX).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def paired_release(package: str, torch_version: str) -> str:
    """The release of `package` built for this torch release: torchvision 0.(minor+15).patch (0.28.0 for
    torch 2.13.0, 0.29.1 for 2.14.1), torchaudio the torch release itself."""
    major, minor, patch = torch_release(torch_version).split(".")
    return f"0.{int(minor) + 15}.{patch}" if package == "torchvision" else f"{major}.{minor}.{patch}"


def _build_label(version: str) -> str | None:
    """`cu130` for `0.28.0+cu130`, `cpu` for `0.28.0+cpu`, None without a local label."""
    return version.partition("+")[2] or None


def _installed_version(package: str) -> str | None:
    """The package's own `__version__` (with its build label), from its version.py, without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    version_file = Path(next(iter(spec.submodule_search_locations)), "version.py")
    match = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", version_file.read_text(errors="replace"), re.M) \
        if version_file.is_file() else None
    return match.group(1) if match else None


def _required_torch(package: str) -> str | None:
    """The torch release the package's metadata pins (`torch==2.13.0`), if it pins one."""
    try:
        requirements = requires(package) or []
    except PackageNotFoundError:
        return None
    for requirement in requirements:
        match = re.match(r"torch\s*\(?\s*==\s*([\d.]+)", requirement)
        if match and ";" not in requirement:
            return match.group(1)
    return None


def mismatch(package: str, torch_version: str, torch_cuda: str | None) -> str | None:
    """One line when `package` (torchvision or torchaudio) is installed but cannot load beside this torch: what
    is wrong and the command that installs the build that pairs with it; None when it pairs or is absent."""
    version = _installed_version(package)
    if version is None:
        return None
    release = torch_release(torch_version)
    wanted = paired_release(package, torch_version)
    label, required = _build_label(version), _required_torch(package)
    cuda_build = label is not None and label.startswith("cu")
    if required is not None and required != release:
        problem = f"{package} {version} is built for torch {required}, not for this torch {torch_version}"
    elif cuda_build and torch_cuda is None:
        problem = (f"{package} {version} is a CUDA build beside the CPU torch {torch_version}: its C++ ops cannot "
                   f"load (`import {package}` fails: operator {package}::... does not exist)")
    else:
        return None
    if torch_cuda is None:
        fix = (f"install its CPU build: pip install --force-reinstall --no-deps {package}=={wanted} "
               f"--index-url {TORCH_CPU_INDEX}")
    else:
        fix = f"install the build for this torch: pip install --force-reinstall --no-deps {package}=={wanted}"
    return f"{problem}; {fix} (or uninstall it: pip uninstall {package})"
