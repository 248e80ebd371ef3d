"""Shared fixtures: offline Hugging Face, the bundled model, the architecture zoo, and fresh-process runs."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from neuronkit.resources import data_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

ROOT = Path(__file__).resolve().parent.parent
TINY_QWEN3 = data_dir() / "models" / "tiny-qwen3"


def _load_zoo_builder():
    """data/build_zoo.py as a module (a script beside the data, not part of the package)."""
    spec = importlib.util.spec_from_file_location("build_zoo", ROOT / "data" / "build_zoo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ZOO_BUILDER = _load_zoo_builder()
ZOO_RECIPES = ZOO_BUILDER.recipes()


@pytest.fixture(scope="session")
def zoo(tmp_path_factory) -> dict[str, Path]:
    """Every checkpoint of the architecture zoo (data/zoo.toml), built once per session (~1 s)."""
    return ZOO_BUILDER.build_zoo(tmp_path_factory.mktemp("zoo"))


@pytest.fixture
def run_python(tmp_path):
    """Run a snippet in a fresh interpreter with extra environment variables; returns the process."""

    def run(code: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
        full_env = {**os.environ, "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "neff"), **(env or {})}
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                              text=True, timeout=300, cwd=ROOT)
        if check and proc.returncode != 0:
            raise AssertionError(f"snippet failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches and counters reset around a test that compiles."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class TwoLayerMLP(nn.Module):
    """A small model that compiles to one graph: Linear -> ReLU -> Linear, 8 -> 16 -> 4."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))
