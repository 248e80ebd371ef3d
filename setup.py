"""Builds neuronkit's native runtime for the simulated device (a C++ extension, as PyTorch's OpenReg is).

Everything else about the package is declared in pyproject.toml."""

import importlib.util
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import Command, setup
from setuptools.command.build import build
from setuptools.modified import newer_group

_CSRC = Path("neuronkit/device/simulator/csrc")


def _native_build():
    """neuronkit/device/simulator/native_build.py, loaded by path: neuronkit itself imports torch."""
    spec = importlib.util.spec_from_file_location("_neuronkit_native_build", _CSRC.parent / "native_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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

import torch  # noqa: E402 - after the one-line checks above
from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

_NATIVE = _native_build()


class _BuildExtension(BuildExtension.with_options(use_ninja=_ninja_on_path())):
    """torch's BuildExtension, keeping setuptools' up-to-date check that its ninja backend turns off: a build
    directory whose extension is newer than every source and header is not compiled again (a wheel built from
    a tree whose build/ already holds it, as tests/test_notebooks.py's wheel test does), unless --force.
    Object files go to a folder of their own per torch release, so that venvs with different torch releases
    building the same checkout do not recompile each other's."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.force = self.get_finalized_command("build").force
        self.build_temp = os.path.join(self.build_temp, f"torch-{_NATIVE.torch_release(torch.__version__)}")

    def run(self) -> None:
        """An editable install (in place) whose extension is newer than its sources is not compiled or copied
        again: setuptools builds it in an empty temporary directory each time, then overwrites the one in the
        source tree, which a running process of another venv of the same torch release may have loaded."""
        build_py = self.get_finalized_command("build_py")
        if self.inplace and not self.force and all(
                os.path.exists(path := self._get_inplace_equivalent(build_py, ext)[0])
                and not newer_group([*ext.sources, *ext.depends], path) for ext in self.extensions):
            return
        super().run()

    def copy_file(self, infile, outfile, *args, **kwargs):  # noqa: ANN001, ANN201 - distutils' signature
        """The built extension replaces the one in the source tree by a rename, never by rewriting it: a process
        that loaded the old file keeps an intact mapping."""
        partial = f"{outfile}.partial"
        copied = super().copy_file(infile, partial, *args, **kwargs)
        os.replace(partial, outfile)
        return outfile, copied[1]


class _BuildNkiPth(Command):
    """Writes `neuronkit-nki.pth` to the root of site-packages: it imports `_neuronkit_nki` at interpreter
    start-up, so that `import nki` works before torch is imported (that module's docstring says how). A wheel
    gets it from the build directory; an editable install (PEP 660) from the wheel's root, where
    setuptools' editable_wheel points `install_lib`."""

    description = "write neuronkit-nki.pth"
    user_options: list = []
    editable_mode = False  # set by setuptools' editable_wheel
    PTH = ("neuronkit-nki.pth", "import _neuronkit_nki\n")

    def initialize_options(self) -> None:
        self.build_lib = None

    def finalize_options(self) -> None:
        self.set_undefined_options("build", ("build_lib", "build_lib"))

    def _target_dir(self) -> str:
        return self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib

    def run(self) -> None:
        name, text = self.PTH
        Path(self._target_dir()).mkdir(parents=True, exist_ok=True)
        Path(self._target_dir(), name).write_text(text)

    def get_outputs(self) -> list[str]:
        return [os.path.join(self._target_dir(), self.PTH[0])]


build.sub_commands.append(("build_nki_pth", None))


setup(
    ext_modules=[CppExtension(
        f"{_NATIVE.PACKAGE}.{_NATIVE.module_name(torch.__version__)}",
        sources=sorted(str(p) for p in _CSRC.glob("*.cpp")),
        depends=sorted(str(p) for p in _CSRC.glob("*.h")),
        extra_compile_args=["-O2", "-g0", "-Wno-unused-parameter"],
    )],
    cmdclass={"build_ext": _BuildExtension, "build_nki_pth": _BuildNkiPth},
)
