"""Builds neuronkit's native runtime for the simulated device (a C++ extension, as PyTorch's OpenReg is).

Everything else about the package is declared in pyproject.toml."""

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import setup

_CSRC = Path("neuronkit/device/simulator/csrc")


def _require_build_tools() -> None:
    """A missing prerequisite ends the build with one line saying what to install."""
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        sys.exit(f"neuronkit build: no C++ compiler ({compiler!r} not found); install g++ "
                 "(Debian: apt-get install g++, or `make build-deps`)")
    headers = Path(sysconfig.get_paths()["include"], "Python.h")
    if not headers.exists():
        sys.exit(f"neuronkit build: Python's C headers are missing ({headers}); install them "
                 "(Debian: apt-get install python3-dev, or `make build-deps`)")
    # Building needs torch's headers and build helpers, not its devices: without this, `import torch` would load
    # every installed device backend, neuronkit's own (an earlier install of it) among them.
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("neuronkit build: torch is not importable; install torch==2.13.0 first "
                 "(pip install 'torch==2.13.0'), then build with --no-build-isolation")


def _ninja_on_path() -> bool:
    """Ninja compiles the C++ files in parallel (one job per core). pip installs it beside the interpreter
    (a venv's bin/, or an isolated build's), which need not be on PATH; torch finds it through PATH."""
    scripts = sysconfig.get_path("scripts")
    if shutil.which("ninja") is None and shutil.which("ninja", path=scripts) is not None:
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
    return shutil.which("ninja") is not None


_require_build_tools()

from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402 - after the one-line checks above


class _BuildExtension(BuildExtension.with_options(use_ninja=_ninja_on_path())):
    """torch's BuildExtension, keeping setuptools' up-to-date check that its ninja backend turns off: a build
    directory whose extension is newer than every source and header is not compiled again (a wheel built from
    a tree whose build/ already holds it, as tests/test_notebooks.py's wheel test does), unless --force."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.force = self.get_finalized_command("build").force


setup(
    ext_modules=[CppExtension(
        "neuronkit.device.simulator._native",
        sources=sorted(str(p) for p in _CSRC.glob("*.cpp")),
        depends=sorted(str(p) for p in _CSRC.glob("*.h")),
        extra_compile_args=["-O2", "-g0", "-Wno-unused-parameter"],
    )],
    cmdclass={"build_ext": _BuildExtension},
)
