"""`neuronkit.profile()` with the real torch-neuronx (issue 21 item 7): the simulator steps aside, and the
call goes through the documented recipe with public APIs only. The stand-in `torch_neuronx` below has only
what the Neuron docs and S document (behaviour doc §6; S torch_neuronx/__init__.py:251-258
`get_fallback_ops`): `torch_neuronx.profiling.NeuronConfig` with its documented parameters,
`ProfileMode`, `NeuronProfiler(config).export_trace`. No simulator is installed in that process, so
touching the simulator's internals would fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FAKE_INIT = '''
"""A stand-in for the real torch-neuronx: its documented public API, nothing of the simulator."""
FALLBACKS = ["aten::cumsum", "aten::add.Tensor"]


def get_fallback_ops():
    return list(FALLBACKS)
'''

FAKE_PROFILING = '''
import enum
import json
import os

from torch._C._profiler import _ExperimentalConfig


class ProfileMode(enum.Enum):
    DEVICE = "device"
    RUNTIME = "runtime"
    CPU_UTIL = "cpu_util"
    HOST_MEMORY = "host_memory"


class NeuronConfig(_ExperimentalConfig):
    def __init__(self, modes=None, max_events_per_nc=None, capture_enabled_for_nc=None,
                 profile_output_dir="./output", neff_cache_dir=None, precache_node_info=True):
        super().__init__()
        self.modes = list(modes or [ProfileMode.DEVICE, ProfileMode.RUNTIME])
        self.profile_output_dir = profile_output_dir


class NeuronProfiler:
    def __init__(self, neuron_config):
        self.config = neuron_config

    def export_trace(self, prof):
        names = sorted({e.key for e in prof.key_averages()})
        with open(os.path.join(self.config.profile_output_dir, "exported.json"), "w") as fh:
            json.dump({"modes": [m.value for m in self.config.modes], "ops": names}, fh)
'''

SNIPPET = '''
import json, sys
import torch
import neuronkit
from neuronkit.device.simulator.registration import installed

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.linear(x).cumsum(-1) + 1

frame = neuronkit.profile(Net(), torch.randn(2, 8), steps=2, warmup=3, output_dir=sys.argv[1])
print(json.dumps({"installed": installed(), "rows": frame.to_dict("records"), "attrs": frame.attrs}))
'''


@pytest.mark.subprocess
def test_profile_uses_only_the_real_backends_public_api(tmp_path: Path, forked_python) -> None:
    package = tmp_path / "fake" / "torch_neuronx"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_INIT)
    (package / "profiling.py").write_text(FAKE_PROFILING)
    out = tmp_path / "profile"
    out.mkdir()
    code = f"import sys; sys.argv = ['-', {str(out)!r}]\n" + SNIPPET
    proc = forked_python(code, env={"NEURONKIT_SIMULATOR": "0", "PYTHONPATH": str(tmp_path / "fake")})
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["installed"] is False  # the simulator stepped aside
    rows = {row["name"]: row for row in result["rows"]}
    assert rows["aten::cumsum"]["classification"] == "cpu_fallback" and rows["aten::cumsum"]["calls"] == 2
    assert rows["aten::add"]["classification"] == "cpu_fallback"  # the overload is the profiler's op name
    assert rows["aten::addmm"]["classification"] == "native" and rows["aten::addmm"]["cpu_time_us"] > 0
    assert rows["aten::addmm"]["est_trn2_us"] is None  # the roofline is the simulator's: not claimed here
    exported = json.loads((out / "exported.json").read_text())  # the documented on_trace_ready ran
    assert exported["modes"] == ["device", "runtime"] and "aten::addmm" in exported["ops"]
    attrs = result["attrs"]
    assert attrs["run_dir"] == str(out) and attrs["trace_path"] is None and attrs["steps"] == 2
    assert {f["name"] for f in attrs["fallbacks"]} == {"aten::cumsum", "aten::add"}
    assert attrs["overhead"]["plain_ms"] > 0 and attrs["hardware"]["chip"]


def test_the_real_path_imports_nothing_of_the_simulator() -> None:
    import ast

    source = Path(__file__).resolve().parents[2] / "neuronkit" / "profiling" / "real.py"
    imported = {alias.name if isinstance(node, ast.Import) else node.module
                for node in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    ours = {name for name in imported if name.startswith("neuronkit")}
    assert ours == {"neuronkit.policy", "neuronkit.profiling.roofline"}, ours
