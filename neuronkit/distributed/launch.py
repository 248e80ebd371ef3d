"""Launch `neuronkit.distributed.scenarios` with torchrun on simulated cores and collect each rank's results.

One torchrun per node, as on real instances (`torchrun --nproc_per_node N --rdzv-backend c10d
--rdzv-endpoint HOST:PORT`); `nnodes=2` starts two launchers on localhost that meet at the same endpoint,
each with its own local ranks 0..N-1, so each "node" uses its own `neuron:0..N-1`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from neuronkit.errors import NeuronkitInputError


def free_port() -> int:
    """A TCP port nothing listens on now, for the rendezvous endpoint."""
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def torchrun_command(scenarios: list[str], out: Path, nproc: int, port: int, nnodes: int = 1,
                     node_rank: int = 0, model: str = "tiny-qwen3") -> list[str]:
    """The torchrun command line for one node."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--nproc-per-node={nproc}",
            f"--node-rank={node_rank}", "--rdzv-backend=c10d", f"--rdzv-endpoint=localhost:{port}",
            "--rdzv-id=neuronkit", "-m", "neuronkit.distributed.scenarios", "--out", str(out), "--model", model,
            *scenarios]


def stop(launcher: subprocess.Popen, grace: float = 30) -> None:
    """End a torchrun launcher (started with `start_new_session=True`) that outlived its job's time limit, and
    its workers. torchrun starts each worker in a session of its own
    (torch/distributed/elastic/multiprocessing/subprocess_handler/subprocess_handler.py: `start_new_session`),
    so killing the launcher's process group leaves them running. SIGTERM first: the launcher stops its workers
    (SIGTERM, then SIGKILL) and exits; whatever is left after `grace` seconds is killed, the launcher's group and
    the workers it had started."""
    if launcher.poll() is not None:
        return
    workers = _children(launcher.pid)
    os.killpg(launcher.pid, signal.SIGTERM)
    try:
        launcher.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        workers |= _children(launcher.pid)
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
    for pid in workers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (Linux's /proc; elsewhere none are found)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


TRAINING = frozenset({"ddp", "fsdp1", "fsdp2", "tp"})  # the scenarios that train `model`
TRAIN_BUDGET = 1 << 30  # float32 parameter bytes: every rank and the CPU reference hold a copy and its grads


def untrainable(model: str | os.PathLike) -> str:
    """Why `model` cannot be a training scenario's model on this machine ("" when it can): the scenarios
    train a causal LM, every rank and the CPU reference in float32."""
    from neuronkit.models import estimate_bytes, load_config, task_of
    config = load_config(model)
    if (task := task_of(config)) != "causal_lm":
        return f"{model} is a model for {task.replace('_', ' ')}; the training scenarios train a causal LM"
    if (size := estimate_bytes(config)) > TRAIN_BUDGET:
        return (f"{model} has {size / 2**30:.1f} GiB of float32 parameters, above the "
                f"{TRAIN_BUDGET / 2**30:.0f} GiB the training scenarios allow per copy on one machine")
    return ""


def run(scenarios: list[str], nproc: int = 2, nnodes: int = 1, timeout: float = 120,
        out: str | os.PathLike | None = None, model: str | os.PathLike = "tiny-qwen3") -> list[dict[str, Any]]:
    """Run `scenarios` (names in `scenarios.SCENARIOS`) on `nnodes` x `nproc` ranks, training `model` (a
    causal LM) where they train one; one result dict per rank, by rank. Raises NeuronkitInputError for an
    unknown scenario, RuntimeError with the launchers' output when a rank fails or the job outlives
    `timeout` seconds (its launchers and ranks are stopped: `stop`)."""
    from neuronkit.distributed.scenarios import SCENARIOS
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown or not scenarios:
        raise NeuronkitInputError(f"unknown scenario(s) {unknown or '(none given)'}; choose from {sorted(SCENARIOS)}")
    if TRAINING & set(scenarios) and (reason := untrainable(model)):
        raise NeuronkitInputError(reason)
    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="neuronkit-dist-"))
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("NEURON_RT_VISIBLE_CORES", None)  # each rank gets its own core from the process group
    logs = [out / f"node{node}.log" for node in range(nnodes)]
    launchers = [subprocess.Popen(torchrun_command(scenarios, out, nproc, port, nnodes, node, str(model)), env=env,
                                  stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
                 for node, log in enumerate(logs)]
    deadline = time.monotonic() + timeout
    failed = []
    for node, launcher in enumerate(launchers):
        try:
            if launcher.wait(timeout=max(0.0, deadline - time.monotonic())) != 0:
                failed.append(node)
        except subprocess.TimeoutExpired:
            for other in launchers:
                stop(other)
            failed.append(node)
    if failed:
        text = "\n".join(log.read_text()[-4000:] for log in logs)
        raise RuntimeError(f"torchrun job {scenarios} failed on node(s) {failed}:\n{text}")
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(nproc * nnodes)]
