"""`neuronkit.detect()`: real / simulated / none, with the reason — the real branch via stand-ins."""

from __future__ import annotations

import importlib.machinery
import json
import os
import types
from pathlib import Path

import pytest
import torch

import neuronkit
from neuronkit.cli import main
from neuronkit.device.detect import Probe, decide

ROOT = Path(__file__).resolve().parents[2]


def test_simulated_here():
    report = neuronkit.detect()
    assert report.kind == "simulated"
    assert report.device_count == 64 and report.instance_family == "trn2"
    assert report.hbm_bytes_per_core == 24 * 2**30 and report.logical_nc_config == 2
    assert report.versions["torch"] == torch.__version__ and report.versions["torch"][:4] in ("2.13", "2.14")
    assert "simulated" in str(report)


def _stand_in_real_backend(device_nodes: list[str]) -> Probe:
    """A Probe that sees an installed torch_neuronx (a stand-in module) and the given device nodes."""
    fake_neuron = types.SimpleNamespace(
        device_count=lambda: 2,
        get_device_properties=lambda i: types.SimpleNamespace(name="trn2", total_memory=24 * 2**30,
                                                              logical_nc_config=2),
    )
    fake = types.ModuleType("torch_neuronx")
    fake.__version__ = "2.13.3.0.1"
    fake.neuron = fake_neuron
    spec = importlib.machinery.ModuleSpec("torch_neuronx", None)

    def find_spec(name: str):
        return spec if name == "torch_neuronx" else importlib.util.find_spec(name)

    def import_module(name: str):
        return fake if name == "torch_neuronx" else importlib.import_module(name)

    return Probe(find_spec=find_spec, device_nodes=lambda: device_nodes, import_module=import_module)


def test_real_backend_with_device_is_adopted():
    report = neuronkit.detect(_stand_in_real_backend(["/dev/neuron0"]))
    assert report.kind == "real"
    assert report.device_count == 2 and report.versions["torch_neuronx"] == "2.13.3.0.1"
    assert report.device_nodes == ["/dev/neuron0"]


def test_real_package_without_device_is_not_simulated():
    decision = decide(_stand_in_real_backend([]))
    assert decision.kind == "none"
    assert "no Neuron device" in decision.reason and "neuron-ls" in decision.reason


def test_simulator_switch(monkeypatch):
    monkeypatch.setenv("NEURONKIT_SIMULATOR", "0")
    assert decide().kind == "none"


def test_cli_detect_json(capsys):
    assert main(["detect", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "simulated" and data["device_count"] == 64


@pytest.mark.subprocess
def test_pypi_placeholders_are_named_and_the_simulator_still_loads(forked_python, tmp_path):
    """`pip install torch-neuronx` from PyPI installs a placeholder whose import raises "WRONG PACKAGE"
    (likewise neuronx-cc and nki): detection names it in one line and where the real package comes from."""
    for module in ("torch_neuronx", "neuronxcc", "nki"):
        (tmp_path / module).mkdir()
        (tmp_path / module / "__init__.py").write_text(
            'raise Exception("WRONG PACKAGE. Use --extra-index-url=https://pip.repos.neuron.amazonaws.com")\n')
    proc = forked_python("""
        import torch
        import neuronkit
        print(torch.ones(2, device="neuron").device)
        print(neuronkit.detect())
    """, env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    assert proc.stdout.splitlines()[0] == "neuron:0"
    assert "neuron device: simulated" in proc.stdout and "PyPI's placeholder" in proc.stdout
    notes = [line for line in proc.stdout.splitlines() if line.strip().startswith("note:")]
    assert len(notes) == 3 and all("pip.repos.neuron.amazonaws.com" in n for n in notes)
    assert "Traceback" not in proc.stderr
