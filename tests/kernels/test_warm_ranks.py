"""The tests' torchrun ranks, forked from one warm server (tests/conftest.py's PYTHON_EXEC:
tests/kernels/rank_server.py running tests/kernels/interpreter.py): a forked rank loads the device
itself under its own environment, runs as `python -u` runs it (sys.argv, sys.path[0], `__main__`, exit status,
traceback, threads and atexit), dies with its launcher, and one whose start-up environment differs from the
server's runs in a real interpreter. These use the session's server (none when PYTHON_EXEC was set by hand)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import RANK_LOG, rank_server_noted

pytestmark = [pytest.mark.subprocess,
              pytest.mark.skipif(RANK_LOG not in os.environ, reason="no rank server in this session (PYTHON_EXEC set, or not Linux)")]


def _launch(args: list[str], cwd: Path, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    """`python ARGS` as torchrun starts a rank: through PYTHON_EXEC, with the tests' environment plus `env`."""
    return subprocess.run([os.environ["PYTHON_EXEC"], *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}, **kwargs)


def test_a_forked_rank_has_the_device_and_reads_its_own_environment(tmp_path: Path) -> None:
    """The server imported torch without the device: each rank installs it, reading its own variables. A
    TORCHINDUCTOR_CACHE_DIR set to torch's default (torch._dynamo writes it when imported, so a torchrun that
    compiled first passes it on) is what the server's imports set themselves: still forked."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    marker = uuid.uuid4().hex
    code = (f"# {marker}\nimport json, os, sys, torch\n"
            "print(json.dumps([os.getppid(), os.environ['LOCAL_RANK'], torch.neuron.device_count(), "
            "torch.ones(2, device='neuron').sum().item(), 'neuronkit.device' in sys.modules]))")
    seen = []
    for local_rank, cores in (("0", "0-1"), ("1", "0-2")):
        proc = _launch(["-u", "-c", code], tmp_path, {"LOCAL_RANK": local_rank, "NEURON_RT_VISIBLE_CORES": cores,
                                                       "TORCHINDUCTOR_CACHE_DIR": os.path.abspath(default_cache_dir())})
        assert proc.returncode == 0, proc.stderr
        seen.append(json.loads(proc.stdout))
    assert [s[1:] for s in seen] == [["0", 2, 2.0, True], ["1", 3, 2.0, True]]
    assert rank_server_noted(marker) == ["forked", "forked"]
    assert seen[0][0] == seen[1][0] != os.getpid(), "not forked by the one server"


MODULE = """
import atexit, json, os, sys, threading, time
def late():
    time.sleep(0.2)
    print("thread done", flush=True)
threading.Thread(target=late).start()
atexit.register(lambda: print("atexit ran"))
print(json.dumps({"argv": sys.argv, "path": sys.path[:2], "name": __name__, "file": globals().get("__file__"),
                  "spec": getattr(__spec__, "name", None), "cwd": os.getcwd(), "stdin": sys.stdin.read()}))
sys.stdout.write("unbuffered ")
sys.stderr.write("to stderr\\n")
EXIT
"""


@pytest.mark.parametrize(("form", "ending"), [
    ("-m", ""), ("script", "raise SystemExit(3)"), ("-c", "raise SystemExit('a message')"),
    ("script", "def f():\n    1 / 0\nf()"), ("-m", "raise KeyboardInterrupt"), ("-m", "import helper")])
def test_a_forked_command_runs_as_the_interpreter_runs_it(tmp_path: Path, form: str, ending: str) -> None:
    """Output, error output and exit status of a forked command equal a real interpreter's, for each way
    torchrun (or a user) names the program, with PYTHONPATH adding a directory (as `neuronkit port --run`
    does for the script's own modules); the command imports no torch, so the real one is cheap."""
    marker = uuid.uuid4().hex
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    source = f"# {marker}\n" + MODULE.replace("EXIT", ending)
    (package / "job.py").write_text(source)
    target = {"-m": ["-m", "pkg.job"], "script": ["pkg/job.py"], "-c": ["-c", source]}[form]
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helper.py").write_text("print('helper from', __file__)")
    path = os.pathsep.join(filter(None, [str(tmp_path / "lib"), os.environ.get("PYTHONPATH")]))
    args = ["-u", *target, "--flag", marker]
    forked = _launch(args, tmp_path, {"PYTHONPATH": path}, input="from stdin")
    real = subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          input="from stdin", env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path})
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)
    assert rank_server_noted(marker) == ["forked"]
    assert "atexit ran" in real.stdout and "thread done" in real.stdout


def test_a_launcher_killed_with_sigkill_takes_its_rank_with_it(tmp_path: Path) -> None:
    """torchrun's timeout kills its workers' process group outright: the rank, the server's child, goes too."""
    code = "import os, time; print(os.getpid(), flush=True); time.sleep(120)"
    launcher = subprocess.Popen([os.environ["PYTHON_EXEC"], "-u", "-c", code], cwd=tmp_path, stdout=subprocess.PIPE,
                                text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    rank = int(launcher.stdout.readline())
    assert rank != launcher.pid, "not forked"
    launcher.kill()
    launcher.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{rank}").exists():
        time.sleep(0.05)
    assert not Path(f"/proc/{rank}").exists(), "the rank outlived its launcher"


def test_a_rank_with_another_start_up_variable_runs_in_a_real_interpreter(tmp_path: Path) -> None:
    """OMP_NUM_THREADS is read when torch loads (libgomp): with another value than the server's, the launcher
    execs the real interpreter, which is then torchrun's own child; the decline is in the server's log."""
    marker = uuid.uuid4().hex
    code = f"# {marker}\nimport os, sys; print(os.getppid(), os.environ['OMP_NUM_THREADS'], sys.argv)"
    proc = _launch(["-u", "-c", code, "x"], tmp_path, {"OMP_NUM_THREADS": "2"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(os.getpid()), "2", "['-c',", "'x']"]
    log = [line for line in Path(os.environ[RANK_LOG]).read_text().splitlines() if marker in line]
    assert len(log) == 1 and "declined: " in log[0] and "OMP_NUM_THREADS" in log[0], log
