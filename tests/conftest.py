"""Shared fixtures: offline Hugging Face, the bundled model, and fresh-process runs."""

from __future__ import annotations

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
