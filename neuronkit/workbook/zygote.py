"""A fork server for the notebooks' kernels: one process imports torch, transformers, matplotlib, neuronkit
and ipykernel once, then every notebook's kernel is a `fork()` of it, started in milliseconds
instead of seconds of imports.

Each kernel is still its own process, forked from a server that has only imported modules: importing
creates no device state (the simulated device registers, but allocates nothing and runs no op), no NEFF
cache statistics, no op tracking and no notebook variables, and leaves no thread running at a fork (torch
starts its thread pool at the first parallel op, the kernel creates its zmq context after the fork). So a
notebook still cannot see another notebook's state, exactly as with one fresh process per notebook.

How a kernel starts: the kernelspec's command is `kernel_launcher.py` (see there), which sends its
arguments, working directory, environment and standard streams over a unix socket; the server forks; the
child takes them over and runs `ipykernel` as `python -m ipykernel_launcher` would. The server reaps its
children and tells each launcher its kernel's exit status; it kills a kernel whose launcher went away, and
exits (killing its kernels) when the process that started it does. A kernel whose environment differs from
the server's (modules read variables when imported, e.g. HF_HUB_OFFLINE) is declined, and the launcher
starts an ordinary kernel instead; so does a kernel forked while the server had a second thread (the
fork is killed at once). Linux only (`available()`); elsewhere the runner keeps warm kernels.

    python -m neuronkit.workbook.zygote FD DIR PID   # what ForkServer starts: FD its listening socket, in
                                                      # DIR, for the runner PID
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from neuronkit.workbook.kernel_launcher import HEADER

# Modules every notebook imports (kernel.PRELOAD's) and the kernel's own; imported once, by the server.
# Only modules whose import does the same with or without a kernel's shell: not matplotlib's inline backend,
# which hooks itself into the IPython shell that exists when it is imported (it registers the PNG formatter
# for figures and the hook that shows them after each cell). Imported by the server, where there is no
# shell, it hooked into nothing and every plot of a forked kernel printed as `<Figure size ...>`; the
# kernel's first figure imports it (milliseconds), as in an ordinary kernel.
# Nor pandas: it imports pyarrow, whose allocator (jemalloc) starts a background thread, and a fork copies
# only the forking thread; each kernel imports pandas while the notebook before it runs (kernel.PRELOAD).
# (numpy's OpenBLAS starts a thread pool too, and joins it before any fork, in its own atfork handler.)
IMPORTS = ("torch", "transformers", "matplotlib.pyplot", "neuronkit.models", "neuronkit.workbook.display",
           "neuronkit.workbook.lesson", "ipykernel.kernelapp", "ipykernel.ipkernel")
# What the stage notebooks import besides (seconds each: AOTAutograd, the check's steps, the report's renderer),
# imported by a workbook run's server (`stage_modules`) one module at a time while it has no request waiting,
# so the first kernels are not kept waiting for them and every kernel forked later has them. The same rules
# as IMPORTS: not profiling (it imports pandas), nor ipywidgets (it registers with the shell that exists
# when it is imported).
IDLE_IMPORTS = ("torch._functorch.aot_autograd", "transformers.modeling_layers", "transformers.masking_utils",
                "neuronkit.workbook.loading", "neuronkit.checks.parity", "neuronkit.workbook.cpu_baseline",
                "neuronkit.workbook.eager", "neuronkit.workbook.audit", "neuronkit.workbook.torch_compile",
                "torch._inductor.debug", "neuronkit.reporting.render")
# Variables that may differ between the server and a kernel: jupyter_client's per-kernel ones (parent pid,
# session, interrupt event), and ones read only when used, never at import: torch writes its default
# TORCHINDUCTOR_CACHE_DIR into the environment at first use (torch/_inductor/runtime/cache_dir_utils.py),
# which the runner's own checks trigger.
MAY_DIFFER = ("JPY_", "IPY_", "TORCHINDUCTOR_CACHE_DIR")
# The matplotlib backend ipykernel selects before a notebook's first import (IPKernelApp.init_gui_pylab).
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
POLL_S = 0.05
# A launcher sends its whole request as soon as it connects; one that does not is not waited for.
REQUEST_TIMEOUT_S = 10


def available() -> bool:
    """Whether kernels can be forked here: Linux (fork with file-descriptor passing over unix sockets)."""
    return sys.platform == "linux" and hasattr(os, "fork") and hasattr(socket, "send_fds")


class ForkServer:
    """The server process and the kernelspec that starts kernels through it. `kernel_spec_manager` finds
    kernel `name` (this interpreter, launched through the server); the server imports under environment
    `env`, which should be the kernels' own (it declines kernels with another); `close()` stops it."""

    def __init__(self, name: str, display_name: str, env: dict[str, str], stage_modules: bool = False) -> None:
        from jupyter_client.kernelspec import KernelSpecManager

        self._dir = Path(tempfile.mkdtemp(prefix="neuronkit-kernels-"))
        self.socket = str(self._dir / "zygote.sock")
        spec = self._dir / "kernels" / name
        spec.mkdir(parents=True)
        launcher = Path(__file__).with_name("kernel_launcher.py")
        argv = [sys.executable, "-I", "-S", str(launcher), self.socket, "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": display_name,
                                                      "language": "python", "interrupt_mode": "signal"}))
        self.kernel_spec_manager = KernelSpecManager(kernel_dirs=[str(spec.parent)])
        # Listening before the server even imports neuronkit (which imports torch): a kernel asked for
        # early waits in the queue instead of finding no server and starting the slow way.
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.socket)
            listener.listen(64)
        except OSError:
            listener.close()
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        # In its own empty directory (`-m` puts the working directory first on sys.path) and its own
        # session: a Ctrl-C meant for `neuronkit run` reaches the runner, which shuts the kernels down.
        with listener:
            self._process = subprocess.Popen([sys.executable, "-m", "neuronkit.workbook.zygote",
                                              str(listener.fileno()), str(self._dir), str(os.getpid()),
                                              *(["--stage-modules"] if stage_modules else [])],
                                             pass_fds=[listener.fileno()],
                                             stdin=subprocess.DEVNULL, cwd=self._dir, env=env,
                                             start_new_session=True)

    def close(self) -> None:
        """Stop the server (it kills any kernel still running) and remove its socket and kernelspec."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._dir, ignore_errors=True)


def _preload(parent: int) -> bool:
    """Import IMPORTS as a kernel would see them: the cwd out of sys.path (ipykernel_launcher does the
    same), matplotlib's inline backend chosen. False as soon as process `parent` is gone (seconds of
    imports for a runner that stopped meanwhile, e.g. on bad input)."""
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)
    import importlib

    for module in IMPORTS:
        if os.getppid() != parent:
            return False
        importlib.import_module(module)
    return True


def _import_one(pending: list[str]) -> None:
    """Import the first of `pending` (IDLE_IMPORTS left). One that fails is left to the kernel that
    needs it, which then raises its error in its own notebook."""
    import importlib

    try:
        importlib.import_module(pending.pop(0))
    except Exception:  # noqa: BLE001 - the notebook importing it reports it
        pass


def _receive(conn: socket.socket) -> dict[str, Any] | None:
    """One launcher's request: argv, cwd, env, and its stdin/stdout/stderr as `fds`; None if malformed."""
    try:
        head, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
    except OSError:
        return None
    try:
        head += _exactly(conn, HEADER.size - len(head))
        request = json.loads(_exactly(conn, HEADER.unpack(head)[0]))
        if len(fds) == 3:
            return {**request, "fds": fds}
    except (OSError, ValueError):
        pass
    for fd in fds:
        os.close(fd)
    return None


def _exactly(conn: socket.socket, size: int) -> bytes:
    """`size` more bytes from the connection (ConnectionError if it closes first)."""
    data = b""
    while len(data) < size:
        more = conn.recv(size - len(data))
        if not more:
            raise ConnectionError("the launcher went away mid-request")
        data += more
    return data


def threads() -> int:
    """This process's threads, native ones included (torch's intra-op pool, zmq's I/O threads): forking
    is safe only with one, as the child gets only the forking thread and none of the others' locks."""
    return len(os.listdir("/proc/self/task"))


# The server's thread count at each fork, taken in the parent right after it: once the libraries' own atfork
# handlers have run (OpenBLAS joins its pool in one), with the thread count the child was forked from.
AT_FORK: list[int] = []


def differences(imported_under: dict[str, str], env: dict[str, str]) -> list[str]:
    """Variables, other than the per-kernel ones, that a kernel's environment sets differently."""
    keys = {*imported_under, *env}
    return sorted(k for k in keys if not k.startswith(MAY_DIFFER) and imported_under.get(k) != env.get(k))


def _serve(listener: socket.socket, imported_under: dict[str, str], parent: int,
           idle_imports: tuple[str, ...]) -> dict[str, Any] | None:
    """Fork a kernel per request until told to stop or orphaned (process `parent` gone), importing
    `idle_imports` while no request waits; returns the request in a forked child, None in the server when
    it is done."""
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    kernels: dict[int, socket.socket | None] = {}  # kernel pid -> its launcher's connection
    pending = list(idle_imports)
    while not stopping and os.getppid() == parent:
        events = selector.select(0 if pending else POLL_S)
        if not events and pending:
            _import_one(pending)
        for key, _ in events:
            if key.fileobj is listener:
                conn, _ = listener.accept()
                conn.settimeout(REQUEST_TIMEOUT_S)
                request = _receive(conn)
                conn.settimeout(None)
                differ = differences(imported_under, request["env"]) if request else []
                if request is None or differ:
                    for fd in request["fds"] if request else []:
                        os.close(fd)
                    if differ:
                        print(f"neuronkit fork server: the kernel's environment sets {', '.join(differ)} otherwise "
                              "than the server imported under: starting an ordinary kernel", file=sys.stderr)
                    _send(conn, "cold")
                    conn.close()
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    for other in (listener, *filter(None, kernels.values())):
                        other.close()
                    conn.close()
                    return request
                for fd in request["fds"]:
                    os.close(fd)
                if AT_FORK[-1] > 1:  # the kernel may hang on a lock another thread held: an ordinary one instead
                    _kill(pid)
                    os.waitpid(pid, 0)
                    print(f"neuronkit fork server: {AT_FORK[-1]} threads when forking, where a fork copies one: "
                          "starting an ordinary kernel", file=sys.stderr)
                    _send(conn, "cold")
                    conn.close()
                    continue
                _send(conn, f"pid {pid}")
                kernels[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
            elif not key.fileobj.recv(64):  # the launcher is gone (killed): so goes its kernel
                selector.unregister(key.fileobj)
                key.fileobj.close()
                kernels[key.data] = None
                _kill(key.data)
        _reap(kernels, selector)
    for pid in kernels:
        _kill(pid)
    return None


def _reap(kernels: dict[int, socket.socket | None], selector: selectors.BaseSelector) -> None:
    """Collect exited kernels and tell each launcher its kernel's exit code (negative: killed by signal)."""
    while kernels:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = kernels.pop(pid, None)
        if conn is not None:
            selector.unregister(conn)
            _send(conn, f"exit {os.waitstatus_to_exitcode(status)}")
            conn.close()


def _send(conn: socket.socket, line: str) -> None:
    try:
        conn.sendall(f"{line}\n".encode())
    except OSError:
        pass  # the launcher is gone; its kernel is killed when its connection reads as closed


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _become_kernel(request: dict[str, Any]) -> None:
    """In the forked child: take over the launcher's streams, directory and environment, then run the
    kernel as `python -m ipykernel_launcher` does. It exits if the server (its parent) does."""
    for signum, handler in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
        signal.signal(signum, handler)
    for target, fd in enumerate(request["fds"]):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # A fresh process seeds these from the OS; forks would share the server's. (Python's `random` reseeds
    # itself after a fork; the neuron devices' generators are created and seeded at first use, after it.)
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()
    if "torch" in sys.modules:
        sys.modules["torch"].default_generator.seed()
    from ipykernel import kernelapp

    sys.argv = [sys.argv[0], *request["argv"]]
    kernelapp.launch_new_instance(argv=[*request["argv"], f"--IPKernelApp.parent_handle={os.getppid()}"])


def main(argv: list[str]) -> int:
    """Import, then serve on the listening socket whose descriptor is argv[0] (ForkServer's, bound
    before this process started, so connections have queued meanwhile); when done, remove directory
    argv[1] (socket and kernelspec), which a runner killed outright could not. The runner's pid is argv[2],
    not this process's parent as it reads at start-up: a runner gone before then would leave it orphaned
    from the start, and it would serve forever. `--stage-modules`: import IDLE_IMPORTS while idle (a
    workbook run's server, whose later kernels run the stage notebooks)."""
    imported_under, parent = dict(os.environ), int(argv[2])
    listener = socket.socket(fileno=int(argv[0]))
    request = None
    if _preload(parent):
        os.register_at_fork(after_in_parent=lambda: AT_FORK.append(threads()))
        request = _serve(listener, imported_under, parent, IDLE_IMPORTS if "--stage-modules" in argv else ())
    if request is None:  # the server is done: skip tearing down torch & co. (seconds under load)
        shutil.rmtree(argv[1], ignore_errors=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    _become_kernel(request)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
