"""`accelerate launch` with two processes on two simulated cores (issue 24 item 3): accelerate picks
MULTI_NEURON, DDP training matches one CPU process on the whole batch, and multi-process `load_state` meets
the client finding the audit data names (safetensors refuses `neuron` device strings) with its remedy."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
import torch

from neuronkit import client_paths
from neuronkit.distributed.launch import free_port
from neuronkit.models import load_model

SCRIPT = Path(__file__).with_name("accelerate_two_processes.py")
DEFAULT_PORT = 29500  # accelerate launch's --main_process_port when none is given (torch's default too)


@contextmanager
def _taken(port: int) -> Iterator[None]:
    """Hold `port` as another launch starting at the same moment (another xdist worker's, another job's) does:
    bound, not yet listening, so accelerate's in-use probe (a connect) finds it free and its rendezvous store's
    bind then fails. When something else holds the port already, it is left as it is."""
    with socket.socket() as sock:
        try:
            sock.bind(("", port))
        except OSError:
            pass
        yield


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("accelerate")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("NEURON_RT_VISIBLE_CORES", None)
    with _taken(DEFAULT_PORT):  # the launch must not depend on the default port being free
        proc = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2",
                               "--multi_gpu", "--main_process_port", str(free_port()), str(SCRIPT), str(out)],
                              env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out, [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(2)]


def _cpu_reference() -> tuple[list[float], dict[str, torch.Tensor]]:
    """The same two SGD steps in one CPU process on the whole batch."""
    batch = torch.randint(100, (4, 16), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = load_model("tiny-qwen3").train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(2):
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, {name: p.detach() for name, p in model.named_parameters()}


@pytest.mark.subprocess
def test_accelerate_launch_two_processes_trains_like_one_cpu_process(launched):
    out, ranks = launched
    assert [r["device"] for r in ranks] == ["neuron:0", "neuron:1"]
    assert {r["distributed_type"] for r in ranks} == {"DistributedType.MULTI_NEURON"}
    losses, weights = _cpu_reference()
    assert ranks[0]["losses"] == ranks[1]["losses"] == pytest.approx(losses, abs=1e-4)
    trained = torch.load(out / "weights.pt")
    assert max((trained[name] - weights[name]).abs().max().item() for name in weights) < 1e-4


@pytest.mark.subprocess
def test_multi_process_load_state_meets_the_safetensors_finding_and_its_remedy(launched):
    _, ranks = launched
    finding = client_paths.find("accelerate", "load_state")
    for rank, result in enumerate(ranks):
        assert re.search(finding.match, result["load_error"]), result["load_error"]
        assert f"neuron:{rank}" in result["load_error"]
        assert result["reload_diff"] == 0.0  # the remedy: load_state(..., map_location="cpu")
    assert 'map_location="cpu"' in finding.remedy
