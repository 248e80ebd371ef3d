"""A torchrun job that outlives its time limit is stopped with its workers, which torchrun starts each in a
session of its own (`neuronkit.distributed.launch.stop`, used by `launch.run`, `neuronkit port --run` and the
TorchTitan recipe): killing the launcher's process group alone left them running."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuronkit.distributed import launch

# A worker: writes its pid into the folder it is given, then sleeps (no torch: the launcher is the subject).
WORKER = """
import os, sys, time
folder = sys.argv[-1]
open(os.path.join(folder, f"{os.getpid()}.pid"), "w").close()
time.sleep(120)
"""
# A launcher as torchrun starts workers (each in a new session), which ignores SIGTERM when told to.
LAUNCHER = """
import signal, subprocess, sys, time
worker, folder, ignore = sys.argv[1], sys.argv[2], sys.argv[3] == "ignore"
if ignore:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
ranks = [subprocess.Popen([sys.executable, worker, folder], start_new_session=True) for _ in range(2)]
time.sleep(120)
"""


def _workers(folder: Path, count: int = 2, within: float = 60) -> list[int]:
    """The pids of the `count` workers started in `folder`, once they all have."""
    deadline = time.monotonic() + within
    while len(pids := [int(p.stem) for p in folder.glob("*.pid")]) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(pids) == count, f"{len(pids)} of {count} workers started"
    return pids


def _gone(pid: int, within: float = 10) -> bool:
    """Whether process `pid` has exited (or is a zombie no one reaps) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def scripts(tmp_path: Path) -> tuple[Path, Path, Path]:
    (worker := tmp_path / "worker.py").write_text(WORKER)
    (launcher := tmp_path / "launcher.py").write_text(LAUNCHER)
    (folder := tmp_path / "pids").mkdir()
    return worker, launcher, folder


@pytest.mark.skipif(sys.platform != "linux", reason="finds the workers in /proc")
def test_a_launcher_that_ignores_sigterm_is_killed_after_the_grace_with_its_workers(scripts) -> None:
    worker, launcher, folder = scripts
    proc = subprocess.Popen([sys.executable, launcher, worker, folder, "ignore"], start_new_session=True)
    pids = _workers(folder)
    start = time.monotonic()
    launch.stop(proc, grace=0.5)
    assert proc.returncode is not None and time.monotonic() - start < 10
    assert all(_gone(pid) for pid in pids), "a worker in its own session outlived its launcher"


@pytest.mark.skipif(sys.platform != "linux", reason="finds the workers in /proc")
def test_a_job_over_its_time_limit_leaves_no_rank_running(scripts, monkeypatch) -> None:
    """`launch.run`'s time limit: its RuntimeError, and no rank left running."""
    worker, launcher, folder = scripts
    monkeypatch.setattr(launch, "torchrun_command",
                        lambda *args, **kwargs: [sys.executable, str(launcher), str(worker), str(folder), "die"])
    with pytest.raises(RuntimeError, match=r"failed on node\(s\) \[0\]"):
        launch.run(["collectives"], timeout=3)
    pids = [int(p.stem) for p in folder.glob("*.pid")]
    assert pids and all(_gone(pid) for pid in pids)


@pytest.mark.subprocess
@pytest.mark.skipif(sys.platform != "linux", reason="finds the workers in /proc")
def test_torchrun_stopped_by_sigterm_stops_its_workers_first(scripts) -> None:
    """The real launcher: its workers are in sessions of their own (so a process-group kill misses them),
    and SIGTERM has torchrun stop them before it exits."""
    worker, _, folder = scripts
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_EXEC"}  # workers as torchrun itself starts them
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                             str(worker), str(folder)], start_new_session=True, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids = _workers(folder)
    assert all(os.getsid(pid) == pid for pid in pids), "torchrun's workers lead sessions of their own"
    launch.stop(proc, grace=30)
    assert proc.returncode is not None and all(_gone(pid) for pid in pids)
