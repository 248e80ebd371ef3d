"""Which build of the native runtime belongs to which torch: the extension's module name carries the torch
release it was compiled against (`_native_torch2_13_0`), so venvs with different torch releases can share
one checkout (an editable install builds the extension in place, beside the sources), and a runtime built
for another torch is named in one line instead of failing to load.

Standard library only: setup.py loads this file by path, before neuronkit (which imports torch) can be
imported.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = "neuronkit.device.simulator"
_PREFIX = "_native_torch"


def torch_release(version: str) -> str:
    """`2.13.0` for `2.13.0+cpu`, `2.14.1`, `2.15.0.dev20261101+cu130`: the public release a C++ extension
    is built against (local labels such as +cpu/+cu130 do not change the C++ API it compiles against)."""
    match = re.match(r"\d+\.\d+\.\d+", version)
    if match is None:
        raise ValueError(f"not a torch version: {version!r}")
    return match.group(0)


def module_name(torch_version: str) -> str:
    """The extension's module name (within PACKAGE) for a torch version: `_native_torch2_13_0`."""
    return _PREFIX + torch_release(torch_version).replace(".", "_")


def built_releases(package_dir: Path) -> list[str]:
    """The torch releases whose native runtime lies in `package_dir` (the simulator package's folder)."""
    found = {match.group(1).replace("_", ".") for path in package_dir.glob(_PREFIX + "*")
             if (match := re.match(_PREFIX + r"(\d+_\d+_\d+)\.", path.name))}
    return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))


def missing_message(torch_version: str, package_dir: Path, error: str) -> str:
    """One line: why no native runtime loads for this torch, and the command that builds one."""
    release = torch_release(torch_version)
    built = built_releases(package_dir)
    rebuild = ("build it for this torch in this environment: `pip install --no-build-isolation -e .` in the "
               "checkout (`make setup TORCH=" + ".".join(release.split(".")[:2]) + "` there), or reinstall "
               "neuronkit")
    if release in built:
        return f"neuronkit's native device runtime for torch {release} does not load ({error}): {rebuild}"
    if built:
        return (f"neuronkit's native device runtime is built for torch {', '.join(built)}, not for this "
                f"torch {torch_version}: {rebuild}")
    return f"neuronkit's native device runtime is not built for torch {torch_version} ({error}): {rebuild}"
