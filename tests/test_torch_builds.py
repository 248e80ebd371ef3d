"""The environment around torch: the native runtime built per torch release and named in one line when it is
built for another, torchvision/torchaudio builds that cannot load beside this torch named with the fix, and
`import nki` before torch."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

from neuronkit.device import torch_builds
from neuronkit.device.detect import detect
from neuronkit.device.simulator import native_build

SO = ".cpython-311-x86_64-linux-gnu.so"


def test_the_native_runtime_is_named_by_the_torch_release_it_is_built_for(tmp_path: Path) -> None:
    assert native_build.module_name("2.13.0+cpu") == "_native_torch2_13_0"
    assert native_build.module_name("2.14.1") == "_native_torch2_14_1"
    assert native_build.module_name("2.15.0.dev20261101+cu130") == "_native_torch2_15_0"
    loaded = sys.modules["neuronkit.device.simulator._native"]
    assert loaded.__name__.rpartition(".")[2] == native_build.module_name(torch.__version__)
    for release in ("2_14_1", "2_13_0"):
        (tmp_path / f"_native_torch{release}{SO}").touch()
    (tmp_path / "native.py").touch()
    assert native_build.built_releases(tmp_path) == ["2.13.0", "2.14.1"]


def test_a_runtime_built_for_another_torch_is_named_with_the_command_that_builds_it(tmp_path: Path) -> None:
    (tmp_path / f"_native_torch2_13_0{SO}").touch()
    line = native_build.missing_message("2.14.1", tmp_path, "No module named x")
    assert "\n" not in line
    assert line.startswith("neuronkit's native device runtime is built for torch 2.13.0, not for this torch 2.14.1")
    assert "pip install --no-build-isolation -e ." in line and "make setup TORCH=2.14" in line
    assert "does not load (undefined symbol" in native_build.missing_message("2.13.0+cpu", tmp_path, "undefined symbol")
    assert "is not built for torch 2.14.1" in native_build.missing_message("2.14.1", tmp_path / "none", "No module")


@pytest.mark.subprocess
def test_import_torch_and_detect_say_in_one_line_that_the_runtime_is_for_another_torch(run_python) -> None:
    """A venv whose torch is another release than the checkout's build (seen as: torch reports 2.99.0) gets one
    warning line from the autoload, and `neuronkit detect` gives it as the reason there is no device."""
    proc = run_python("""
        import torch
        torch.__version__ = "2.99.0"
        import neuronkit.device
        neuronkit.device._autoload()
        from neuronkit.device.detect import detect
        print(detect())
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    warning = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(warning) == 1 and "RuntimeWarning: neuronkit could not install the simulated neuron device: " \
        "neuronkit's native device runtime is built for torch" in warning[0], proc.stderr
    assert "not for this torch 2.99.0" in warning[0]
    first = proc.stdout.splitlines()[0]
    assert first.startswith("neuron device: none — neuronkit could not install") and "2.99.0" in first, proc.stdout


def _fake_package(root: Path, name: str, version: str, requires_torch: str) -> None:
    """An installed-looking `name` (its version.py and dist-info), for reading, never importing."""
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("raise ImportError('operator torchvision::nms does not exist')\n")
    (root / name / "version.py").write_text(f"__version__ = '{version}'\ncuda = None\n")
    info = root / f"{name}-{version.partition('+')[0]}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version.partition('+')[0]}\n"
                                   f"Requires-Dist: numpy\nRequires-Dist: torch (=={requires_torch})\n")


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Install fake torchvision/torchaudio builds ahead of the real ones on sys.path."""
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("torchvision", "torchaudio"):
        monkeypatch.delitem(sys.modules, name, raising=False)

    def install(name: str, version: str, requires_torch: str) -> None:
        _fake_package(tmp_path, name, version, requires_torch)
        importlib.invalidate_caches()

    return install


def test_pypi_cuda_torchvision_beside_the_cpu_torch_is_named_with_the_cpu_build_to_install(installed) -> None:
    installed("torchvision", "0.28.0+cu130", "2.13.0")
    line = torch_builds.mismatch("torchvision", "2.13.0+cpu", None)
    assert line == ("torchvision 0.28.0+cu130 is a CUDA build beside the CPU torch 2.13.0+cpu: its C++ ops cannot "
                    "load (`import torchvision` fails: operator torchvision::... does not exist); install its CPU "
                    "build: pip install --force-reinstall --no-deps torchvision==0.28.0 --index-url "
                    f"{torch_builds.TORCH_CPU_INDEX} (or uninstall it: pip uninstall torchvision)")
    # the same build beside torch's CUDA build of that release pairs (2.14's PyPI torch and torchvision do)
    assert torch_builds.mismatch("torchvision", "2.13.0", "13.0") is None


def test_a_torchvision_or_torchaudio_for_another_torch_is_named_in_detect(installed) -> None:
    installed("torchvision", "0.28.0+cu130", "2.13.0")
    installed("torchaudio", "2.11.1", "2.11.1")
    line = torch_builds.mismatch("torchvision", "2.14.1", "13.0")
    assert line.startswith("torchvision 0.28.0+cu130 is built for torch 2.13.0, not for this torch 2.14.1; install the "
                           "build for this torch: pip install --force-reinstall --no-deps torchvision==0.29.1")
    assert torch_builds.paired_release("torchaudio", "2.13.0+cpu") == "2.13.0"
    notes = [note for note in detect().notes if note.startswith(("torchvision", "torchaudio"))]
    assert [note.split(" is ")[0] for note in notes] == ["torchvision 0.28.0+cu130", "torchaudio 2.11.1"], notes


@pytest.mark.subprocess
def test_import_nki_first_in_a_fresh_interpreter(run_python, tmp_path: Path) -> None:
    """`import nki` before torch (NKI's docs and NKI-lib start so) gives neuronkit's stand-in; a real `nki` on the
    path wins, and PyPI's placeholder (whose import raises) counts as none."""
    placeholder, real = tmp_path / "placeholder", tmp_path / "real"
    for folder, source in ((placeholder, "raise ImportError('WRONG PACKAGE: nki')\n"), (real, "REAL = True\n")):
        (folder / "nki").mkdir(parents=True)
        (folder / "nki" / "__init__.py").write_text(source)
    proc = run_python("""
        import sys
        import nki
        import nki.language as nl
        from neuronxcc import nki as old_path
        assert "torch" in sys.modules  # the stand-in loaded the simulated device
        print(nki.jit.__module__, nl.tile_size.pmax, old_path.language.tile_size.pmax)
    """, env={"PYTHONPATH": str(placeholder)})
    assert proc.stdout.split() == ["neuronkit.nki.api", "128", "128"], proc.stdout
    proc = run_python("import sys, nki; print(nki.REAL, 'torch' in sys.modules)", env={"PYTHONPATH": str(real)})
    assert proc.stdout.split() == ["True", "False"], proc.stdout
