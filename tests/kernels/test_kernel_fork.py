"""Kernels forked from the workbook's fork server (neuronkit.kernels.fork_server): each notebook still gets a
kernel of its own (no variables, device memory, NEFF-cache statistics or op tracking from another), the
kernel manager's interrupt, liveness and kill still reach the kernel itself, and where forking cannot
serve (no server, another environment, another platform) an ordinary kernel starts instead."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager

from neuronkit.kernels import fork_server as zygote, starter as kernel
from neuronkit.workbook.runner import KERNEL_ENV

pytestmark = [pytest.mark.subprocess, pytest.mark.skipif(not zygote.available(), reason="forks on Linux only")]

# What a notebook could see of another's: a variable, device memory, the NEFF cache, op tracking.
STATE = """
import json, os, torch, torch_neuronx
print(json.dumps({"var": "leftover" in globals(), "memory": torch.neuron.memory_allocated(0),
                  "neff": torch.neuron.neff_cache_stats()["entries"], "ops": len(torch_neuronx.get_executed_ops()),
                  "ppid": os.getppid(), "draw": torch.rand(1).item(), "neuron_draw": torch.rand(1, device="neuron").item()}))
"""
USE = """
leftover = torch.ones(256, device="neuron") * 2
torch.randn(3)
import numpy
print(numpy.random.random())
"""


# The kernels' environment, as the runner gives it (fixed here: pytest changes PYTEST_CURRENT_TEST as it goes).
ENV = {**KERNEL_ENV, **os.environ}


@pytest.fixture(scope="module")
def server():
    """One fork server for the module, importing under the kernels' environment as the runner does."""
    started = zygote.ForkServer(kernel.KERNEL_NAME, kernel.DISPLAY_NAME, ENV, stage_modules=True)
    yield started
    started.close()


def _start(server, env: dict[str, str] = ENV, **launch) -> tuple[KernelManager, object]:
    """A kernel started through the server, in the runner's kernel environment unless `env` is given
    (`launch`: more of the launcher's Popen arguments, e.g. its stderr)."""
    km = KernelManager(kernel_name=kernel.KERNEL_NAME, kernel_spec_manager=server.kernel_spec_manager)
    km.start_kernel(env=env, **launch)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    return km, kc


def _run(kc, code: str, timeout: float = 60) -> tuple[str, str | None]:
    """A cell's printed text and the name of the error it raised, if any."""
    out, error = [], []

    def hook(msg) -> None:
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            error.append(msg["content"]["ename"])

    kc.execute_interactive(code, output_hook=hook, timeout=timeout)
    return "".join(out), (error[0] if error else None)


def _wait_for_output(kc, msg_id: str, text: str, timeout: float = 60) -> None:
    """Wait until the cell `msg_id` has printed `text` (the kernel is then running that cell's code)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=deadline - time.monotonic())
        if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream"
                and text in msg["content"]["text"]):
            return
    raise AssertionError(f"the kernel did not print {text!r} within {timeout} s")


def _stop(km: KernelManager, kc) -> None:
    kc.stop_channels()
    if km.is_alive():
        km.shutdown_kernel(now=True)
    km.cleanup_resources()


def _server_pid(server) -> int:
    return server._process.pid  # noqa: SLF001 - which process forked the kernel is the point of the test


def test_each_kernel_is_a_fork_that_sees_nothing_of_the_kernel_before_it(server) -> None:
    first, kc1 = _start(server)
    try:
        before = json.loads(_run(kc1, STATE)[0])
        numpy_first = _run(kc1, USE)[0]
        used = json.loads(_run(kc1, STATE)[0])
    finally:
        _stop(first, kc1)
    second, kc2 = _start(server)
    try:
        after = json.loads(_run(kc2, STATE)[0])
        numpy_second = _run(kc2, USE)[0]
    finally:
        _stop(second, kc2)
    assert before["ppid"] == after["ppid"] == _server_pid(server), "the kernels were not forked by the server"
    assert used["var"] and used["memory"] > 0 and used["ops"] > 0 and used["neff"] > 0
    for seen in (before, after):  # what a fresh interpreter starts with: nothing
        assert {k: seen[k] for k in ("var", "memory", "neff", "ops")} == {"var": False, "memory": 0, "neff": 0, "ops": 0}
    # A fresh interpreter seeds torch's, the neuron devices' and numpy's generators at random: so does each fork.
    assert before["draw"] != after["draw"] and before["neuron_draw"] != after["neuron_draw"]
    assert numpy_first != numpy_second


def test_a_forked_kernels_figures_are_images_shown_or_left_open(server) -> None:
    """The inline backend's hooks are the kernel's own (issue 21: forked kernels printed every figure as
    `<Figure size ...>`): a figure left open at the end of a cell and one shown with plt.show() are PNGs."""
    km, kc = _start(server)
    shown: list[dict] = []
    try:
        for cell in ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(2, 1))\nax.plot([1, 2])",
                     "fig, ax = plt.subplots(figsize=(2, 1))\nax.plot([2, 1])\nplt.show()"):
            kc.execute_interactive(cell, output_hook=lambda msg: shown.append(msg), timeout=60)
    finally:
        _stop(km, kc)
    displays = [m["content"]["data"] for m in shown if m["msg_type"] == "display_data"]
    assert len(displays) == 2 and all("image/png" in data for data in displays), displays


def test_logging_from_the_servers_imports_reaches_the_notebook_not_the_terminal(server, tmp_path: Path) -> None:
    """transformers' and torch's log handlers, made while the server imported them, write where a kernel
    that imported them writes: to the cell's output. On the server's stderr (the runner's terminal) a
    sliced run's load report was printed between `neuronkit run`'s progress lines (ipykernel echoes the
    descriptor output it captures)."""
    terminal = tmp_path / "launcher-stderr.txt"
    with terminal.open("w") as stderr:
        km, kc = _start(server, stderr=stderr)
        try:
            out = _run(kc, "import logging, torch._logging\n"
                           "from transformers.utils import logging as hf_logging\n"
                           "hf_logging.get_logger('transformers.modeling_utils').warning('LOAD REPORT (transformers)')\n"
                           "logging.getLogger('torch._dynamo').warning('graph break (torch)')\n"
                           "import sys; sys.stderr.flush()")
        finally:
            _stop(km, kc)
    text, error = out
    assert error is None and "LOAD REPORT (transformers)" in text and "graph break (torch)" in text, out
    assert "LOAD REPORT" not in terminal.read_text() and "graph break" not in terminal.read_text()


def test_the_server_forks_with_one_thread(server) -> None:
    """A fork copies only the forking thread: the server holds no other (no torch pool, no zmq) when it
    forks a kernel, and `threads()`, the count it checks before each fork, sees native threads too."""
    km, kc = _start(server)
    try:
        assert int(_run(kc, "import os; print(os.getppid())")[0]) == _server_pid(server), "not forked"
        assert os.listdir(f"/proc/{_server_pid(server)}/task") == [str(_server_pid(server))]
    finally:
        _stop(km, kc)
    import threading

    before, release = zygote.threads(), threading.Event()
    waiting = threading.Thread(target=release.wait)
    waiting.start()
    try:
        assert zygote.threads() == before + 1
    finally:
        release.set()
        waiting.join()


def test_interrupt_liveness_and_kill_reach_the_forked_kernel(server) -> None:
    km, kc = _start(server)
    try:
        pid = int(_run(kc, "import os; print(os.getpid())")[0])
        assert pid != km.provisioner.pid  # the launcher stands in for it
        # stop_on_error=False: the interrupt is an error, and ipykernel would abort requests it receives while it
        # handles it (asynchronously): the next cell could come back "aborted" without the kernel being at fault
        msg_id = kc.execute("import time; print('sleeping', flush=True); time.sleep(60)", stop_on_error=False)
        _wait_for_output(kc, msg_id, "sleeping")  # inside the cell: an earlier SIGINT could land before it runs
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=20)
        assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["ename"] == "KeyboardInterrupt"
        # read back on the shell channel: the reply itself carries the value, whatever IOPub's stream timing
        after = kc.execute_interactive("answer = 6 * 7", user_expressions={"answer": "answer"}, timeout=60)
        assert after["content"]["status"] == "ok", "the kernel does not work after an interrupt"
        assert after["content"]["user_expressions"]["answer"]["data"]["text/plain"] == "42"
        km.shutdown_kernel(now=True)  # SIGKILL to the launcher's process group: the server kills the kernel
        assert not km.is_alive()
        _gone_within(pid, 5)
    finally:
        _stop(km, kc)


def test_a_kernel_that_dies_ends_its_launcher_with_the_same_signal(server) -> None:
    km, kc = _start(server)
    try:
        kc.execute("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
        deadline = time.monotonic() + 10
        while km.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not km.is_alive(), "the launcher outlived its kernel: the runner's watchdog would not see it die"
        assert km.provisioner.process.returncode == -signal.SIGKILL
    finally:
        _stop(km, kc)


def test_a_kernel_in_another_environment_starts_as_an_ordinary_kernel(server) -> None:
    km, kc = _start(server, env={**ENV, "NEURONKIT_EXAMPLE_SETTING": "1"})
    try:
        out = _run(kc, "import os; print(os.getppid(), os.environ['NEURONKIT_EXAMPLE_SETTING'])")[0].split()
        assert out == [str(os.getpid()), "1"], "declined by the server, the launcher should have become the kernel"
    finally:
        _stop(km, kc)


def test_without_a_server_the_launcher_starts_an_ordinary_kernel(server, tmp_path: Path) -> None:
    spec = json.loads((Path(server.kernel_spec_manager.kernel_dirs[0]) / kernel.KERNEL_NAME / "kernel.json").read_text())
    spec["argv"][spec["argv"].index(server.socket)] = str(tmp_path / "no-server.sock")
    (tmp_path / "kernels" / "nowhere").mkdir(parents=True)
    (tmp_path / "kernels" / "nowhere" / "kernel.json").write_text(json.dumps(spec))
    from jupyter_client.kernelspec import KernelSpecManager

    km = KernelManager(kernel_name="nowhere", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")]))
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        assert _run(kc, "import os; print(os.getppid())")[0].strip() == str(os.getpid())
    finally:
        _stop(km, kc)


def test_no_fork_server_where_kernels_cannot_fork_run_another_python_or_bind_a_socket(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert kernel.fork_server(kernel.KERNEL_NAME, dict(os.environ)) is None
    monkeypatch.undo()
    other = tmp_path / "share" / "jupyter" / "kernels" / "elsewhere"
    other.mkdir(parents=True)
    (other / "kernel.json").write_text(json.dumps({"argv": ["/opt/other/bin/python", "-m", "ipykernel_launcher", "-f",
                                                            "{connection_file}"], "display_name": "x", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share" / "jupyter"))
    assert kernel.fork_server("elsewhere", dict(os.environ)) is None
    monkeypatch.delenv("JUPYTER_PATH")
    deep = tmp_path / ("d" * 120)  # longer than a unix socket's path may be
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    assert kernel.fork_server(kernel.KERNEL_NAME, dict(os.environ)) is None
    assert list(deep.iterdir()) == [], "the failed server left its directory behind"


def _gone_within(pid: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"kernel process {pid} outlived its launcher")


def test_the_console_script_python_forks_kernels_of_its_own_environment(monkeypatch) -> None:
    """`neuronkit run` runs as `.venv/bin/python3.11`; the kernelspec names `.venv/bin/python`: one environment."""
    bindir = os.path.dirname(os.path.abspath(sys.executable))
    monkeypatch.setattr(sys, "executable", os.path.join(bindir, "python3.11"))
    server = kernel.fork_server(kernel.KERNEL_NAME, dict(os.environ))
    try:
        assert server is not None
    finally:
        if server is not None:
            server.close()


def test_kernels_forked_once_the_server_is_idle_have_the_stage_modules(server) -> None:
    """While no kernel is asked for, a workbook run's server imports what the stage notebooks import besides
    (zygote.IDLE_IMPORTS: AOTAutograd, the check's steps, the report's renderer), one module at a time; a
    kernel forked after that has them, and the server still forks with one thread."""
    code = ("import json, sys; from neuronkit.kernels import fork_server as zygote; "
            "print(json.dumps([m for m in zygote.IDLE_IMPORTS if m not in sys.modules]))")
    deadline = time.monotonic() + 90
    while True:
        km, kc = _start(server)
        try:
            missing = json.loads(_run(kc, code)[0])
        finally:
            _stop(km, kc)
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert missing == []
    assert os.listdir(f"/proc/{_server_pid(server)}/task") == [str(_server_pid(server))]


def test_the_first_warm_kernel_preloads_nothing_and_the_ones_ahead_preload(server) -> None:
    """The kernel of the first notebook, which no notebook runs before, starts without PRELOAD (notebook 00
    would wait for pandas it never imports); a kernel started ahead imports PRELOAD while the one before works."""
    warm = kernel.WarmKernels(kernel.KERNEL_NAME, tempfile.gettempdir(), [], count=2,
                              kernel_spec_manager=server.kernel_spec_manager)
    seen = []
    try:
        for _ in range(2):
            km = warm.take()
            kc = km.blocking_client()
            kc.start_channels()
            try:
                kc.wait_for_ready(timeout=120)
                seen.append(_run(kc, "import sys; print('pandas' in sys.modules)")[0].strip())
            finally:
                kc.stop_channels()
                kernel.shutdown(km)
    finally:
        warm.close()
    assert seen == ["False", "True"]


EARLY = """
import json, sys
sys.argv[0] = "/env/bin/neuronkit"  # the console script
import neuronkit
from neuronkit.kernels import starter as kernel
kernel.start_early(["run", "tiny-qwen3", "--out", "x"])
early = kernel._EARLY[kernel.KERNEL_NAME][1]._process.pid
torch_before = "torch" in sys.modules
import torch
starter = kernel.KernelStarter("fork", kernel.KERNEL_NAME, kernel.kernel_env())
print(json.dumps({"torch_before": torch_before, "device": torch.neuron.is_available(),
                  "adopted": starter._server._process.pid == early}))
starter.close()
"""


def test_the_run_command_starts_its_fork_server_before_it_imports_torch() -> None:
    """In the `neuronkit` command the package imports without torch, so `neuronkit run` starts the fork
    server first (its imports then overlap the command's own); the run's KernelStarter adopts it, and the
    command's torch import, before any other neuronkit module, still installs the device."""
    proc = subprocess.run([sys.executable, "-c", EARLY], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == {"torch_before": False, "device": True, "adopted": True}


def test_the_console_script_exits_with_the_commands_code_and_its_line(tmp_path: Path) -> None:
    """`neuronkit` exits without tearing the interpreter down (`cli.console`), with main's exit code and its
    one-line error flushed; the fork server `run` started early is stopped with it."""
    script = ("import sys; sys.argv[:] = ['/env/bin/neuronkit', 'run', sys.argv[1], '--out', sys.argv[2], "
              "'--cell-timeout', '0']; from neuronkit.cli import console; console()")
    short = Path(tempfile.mkdtemp(prefix="nk"))  # the server's unix socket lives under TMPDIR: a short path
    try:
        proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "missing"), str(tmp_path / "run")],
                              capture_output=True, text=True, timeout=120, env={**os.environ, "TMPDIR": str(short)})
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert proc.stderr.strip().splitlines()[-1].startswith("neuronkit run: error: cell_timeout must be a positive")
        assert list(short.iterdir()) == []  # the server's directory (socket, kernelspec) is gone with it
    finally:
        shutil.rmtree(short, ignore_errors=True)


def test_a_server_whose_runner_is_gone_before_it_starts_exits(tmp_path: Path) -> None:
    """A runner killed right after starting the server (still importing) must not leave it serving forever."""
    script = ("import os; from neuronkit.kernels import fork_server as zygote; "
              "print(zygote.ForkServer('neuronkit', 'x', dict(os.environ))._process.pid)")
    printed = tmp_path / "pid"
    with printed.open("w") as out:  # a file, not a pipe: the server inherits it and must not be waited on
        subprocess.run([sys.executable, "-c", script], stdout=out, stdin=subprocess.DEVNULL, timeout=60, check=True)
    _gone_within(int(printed.read_text().split()[-1]), 60)
