"""A fork server for the notebooks' kernels: one process imports torch, transformers, matplotlib, neuronkit
and ipykernel once, then every notebook's kernel is a `fork()` of it, started in milliseconds
instead of seconds of imports.

Each kernel is still its own process, forked from a server that has only imported modules: importing
creates no device state (the simulated device registers, but allocates nothing and runs no op), no NEFF
cache statistics, no op tracking and no notebook variables, and leaves no thread running at a fork (torch
starts its thread pool at the first parallel op, the kernel creates its zmq context after the fork). So a
notebook still cannot see another notebook's state, exactly as with one fresh process per notebook.

How a kernel starts: the kernelspec's command is `launcher.py` (see there), which sends its
arguments, working directory, environment and standard streams over a unix socket; the server forks; the
child takes them over and runs `ipykernel` as `python -m ipykernel_launcher` would. The server reaps its
children and tells each launcher its kernel's exit status; it kills a kernel whose launcher went away, and
exits (killing its kernels) when the process that started it does. A kernel whose environment differs from
the server's (modules read variables when imported, e.g. HF_HUB_OFFLINE) is declined, and the launcher
starts an ordinary kernel instead; so does a kernel forked while the server had a second thread (the
fork is killed at once). Linux only (`available()`); elsewhere the runner keeps warm kernels.

What a server forks is its `Role`: kernels here; the tests fork torchrun's worker processes from the same
loop with a role of their own (tests/kernels/rank_server.py), which `serve` runs.

    python -m neuronkit.kernels.fork_server FD DIR PID [--stage-modules]  # what ForkServer starts: FD its
                                                                           # listening socket, in DIR, for PID
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
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

# Modules every notebook imports (starter.PRELOAD's) and the kernel's own; imported once, by the server.
# Only modules whose import does the same with or without a kernel's shell: not matplotlib's inline backend,
# which hooks itself into the IPython shell that exists when it is imported (it registers the PNG formatter
# for figures and the hook that shows them after each cell). Imported by the server, where there is no
# shell, it hooked into nothing and every plot of a forked kernel printed as `<Figure size ...>`; the
# kernel's first figure imports it (milliseconds), as in an ordinary kernel.
# Nor pandas: it imports pyarrow, whose allocator (jemalloc) starts a background thread, and a fork copies
# only the forking thread; each kernel imports pandas while the notebook before it runs (starter.PRELOAD).
# (numpy's OpenBLAS starts a thread pool too, and joins it before any fork, in its own atfork handler.)
IMPORTS = ("torch", "transformers", "matplotlib.pyplot", "neuronkit.models", "neuronkit.workbook.display",
           "neuronkit.workbook.lesson", "ipykernel.kernelapp", "ipykernel.ipkernel")
# What the stage notebooks import besides (seconds each: AOTAutograd, the check's steps, the report's renderer),
# imported by a workbook run's server (`stage_modules`) one module at a time while it has no request waiting,
# so the first kernels are not kept waiting for them and every kernel forked later has them. The same rules
# as IMPORTS: not profiling (it imports pandas), nor ipywidgets (it registers with the shell that exists
# when it is imported).
IDLE_IMPORTS = ("torch._functorch.aot_autograd", "transformers.modeling_layers", "transformers.masking_utils",
                "neuronkit.pipeline.session", "neuronkit.pipeline.check", "neuronkit.stages.cpu_baseline.run",
                "neuronkit.stages.eager.run", "neuronkit.stages.eager.steps", "neuronkit.stages.audit.run",
                "neuronkit.stages.compile.run", "neuronkit.stages.compile.steps", "torch._inductor.debug",
                "neuronkit.reporting.render")
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


LAUNCHER = Path(__file__).with_name("launcher.py")


class Server:
    """A server process listening on `socket` in its own directory, which `close()` stops and removes."""

    def __init__(self, prefix: str) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.socket = str(self._dir / "fork.sock")

    def _start(self, env: dict[str, str], options: list[str], interpreter_options: tuple[str, ...] = (),
               program: tuple[str, ...] = ("-m", "neuronkit.kernels.fork_server")) -> None:
        """Bind the socket, then start the server (`program`: this module, or another that `serve`s a role
        of its own) on it under `env` with command-line `options`."""
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
            self._process = subprocess.Popen([sys.executable, *interpreter_options, *program,
                                              str(listener.fileno()), str(self._dir), str(os.getpid()), *options],
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


class ForkServer(Server):
    """The server process and the kernelspec that starts kernels through it. `kernel_spec_manager` finds
    kernel `name` (this interpreter, launched through the server); the server imports under environment
    `env`, which should be the kernels' own (it declines kernels with another); `close()` stops it."""

    def __init__(self, name: str, display_name: str, env: dict[str, str], stage_modules: bool = False) -> None:
        from jupyter_client.kernelspec import KernelSpecManager

        super().__init__("neuronkit-kernels-")
        spec = self._dir / "kernels" / name
        spec.mkdir(parents=True)
        argv = [sys.executable, "-I", "-S", str(LAUNCHER), self.socket, "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": display_name,
                                                      "language": "python", "interrupt_mode": "signal"}))
        self.kernel_spec_manager = KernelSpecManager(kernel_dirs=[str(spec.parent)])
        self._start(env, ["--stage-modules"] if stage_modules else [])


class Role:
    """What a server forks, and how: kernels (this class), or another kind of process (a subclass: the tests'
    torchrun ranks). `imports` it imports first, `idle_imports` while no request waits, `may_differ` the
    variable prefixes a request's environment may set otherwise."""

    what = "kernel"

    def __init__(self, stage_modules: bool = False) -> None:
        self.imports: tuple[str, ...] = IMPORTS
        self.idle_imports: tuple[str, ...] = IDLE_IMPORTS if stage_modules else ()
        self.may_differ: tuple[str, ...] = MAY_DIFFER

    def prepare(self) -> None:
        """Before the imports: the matplotlib backend ipykernel selects before a notebook's first import."""
        os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)

    def ready(self) -> bool:
        """After the imports: whether to serve (a role that cannot serve says why in its log)."""
        return True

    def decline(self, imported_under: dict[str, str], settled: dict[str, str], request: dict[str, Any]) -> str | None:
        """Why `request` cannot be forked (noted), or None: its environment sets a variable otherwise than
        the server imported under (`settled`: the server's environment once it has imported)."""
        differ = differences(imported_under, request["env"], self.may_differ)
        if differ:
            return (f"the {self.what}'s environment sets {', '.join(differ)} otherwise than the server imported under: "
                    f"starting an ordinary {self.what}")
        return None

    def note(self, line: str, request: dict[str, Any] | None = None, declined: bool = False) -> None:
        """Note a fork, a decline or the server's state: a decline on stderr (a kernel starts the slow way)."""
        if declined:
            print(f"neuronkit fork server: {line}", file=sys.stderr)

    def become(self, request: dict[str, Any]) -> None:
        """In the forked child: take over the launcher's streams, directory and environment, then run the
        kernel as `python -m ipykernel_launcher` does. It exits if the server (its parent) does."""
        _take_over(request)
        # A fresh process seeds these from the OS; forks would share the server's. (Python's `random` reseeds
        # itself after a fork; the neuron devices' generators are created and seeded at first use, after it.)
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()
        if "torch" in sys.modules:
            sys.modules["torch"].default_generator.seed()
        from ipykernel import kernelapp

        sys.argv = [sys.argv[0], *request["argv"]]
        server_handlers = _standard_stream_handlers()
        app = kernelapp.IPKernelApp.instance()  # what kernelapp.launch_new_instance does, with one step between
        app.initialize([*request["argv"], f"--IPKernelApp.parent_handle={os.getppid()}"])
        for handler, name in server_handlers:
            handler.setStream(getattr(sys, name))
        app.start()


def _preload(parent: int, role: Role) -> bool:
    """Import the role's modules as its children would see them: the cwd out of sys.path (ipykernel_launcher
    does the same; a command puts its own first), the role's own preparation made first. False as soon as
    process `parent` is gone (seconds of imports for a runner that stopped meanwhile, e.g. on bad input)."""
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    role.prepare()
    for module in role.imports:
        if os.getppid() != parent:
            return False
        importlib.import_module(module)
    return True


def _import_one(pending: list[str]) -> None:
    """Import the first of `pending` (IDLE_IMPORTS left). One that fails is left to the kernel that
    needs it, which then raises its error in its own notebook."""
    try:
        importlib.import_module(pending.pop(0))
    except Exception:  # noqa: BLE001 - the notebook importing it reports it
        pass


def _receive(conn: socket.socket) -> dict[str, Any] | None:
    """One launcher's request: argv, cwd, env, and its stdin/stdout/stderr as `fds`; None if malformed."""
    from neuronkit.kernels.launcher import HEADER  # here: this module loads without the package

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


def differences(imported_under: dict[str, str], env: dict[str, str],
                may_differ: tuple[str, ...] = MAY_DIFFER) -> list[str]:
    """Variables, other than those starting with `may_differ` (the per-kernel ones), that a kernel's or
    command's environment sets differently."""
    keys = {*imported_under, *env}
    return sorted(k for k in keys if not k.startswith(may_differ) and imported_under.get(k) != env.get(k))


def _serve(listener: socket.socket, imported_under: dict[str, str], parent: int, role: Role) -> dict[str, Any] | None:
    """Fork a child per request until told to stop or orphaned (process `parent` gone), importing the role's
    idle imports while no request waits; returns the request in a forked child, None in the server when
    it is done."""
    stopping: list[bool] = []
    settled = dict(os.environ)
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    kernels: dict[int, socket.socket | None] = {}  # kernel pid -> its launcher's connection
    pending = list(role.idle_imports)
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
                reason = role.decline(imported_under, settled, request) if request else None
                if request is None or reason:
                    for fd in request["fds"] if request else []:
                        os.close(fd)
                    if reason:
                        role.note(reason, request, declined=True)
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
                    role.note(f"{AT_FORK[-1]} threads when forking, where a fork copies one: "
                              f"starting an ordinary {role.what}", request, declined=True)
                    _send(conn, "cold")
                    conn.close()
                    continue
                role.note(f"forked {pid}", request)
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


def _take_over(request: dict[str, Any]) -> None:
    """In the forked child: take over the launcher's streams, directory and environment, with the signal
    handlers of a fresh interpreter."""
    for signum, handler in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
        signal.signal(signum, handler)
    for target, fd in enumerate(request["fds"]):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])


def _standard_stream_handlers() -> list[tuple[logging.StreamHandler, str]]:
    """The logging handlers that write to the process's own stdout or stderr, with the name of that stream:
    those the server's imports made (transformers' and torch's, made when imported with `StreamHandler()`,
    which takes sys.stderr at that moment). In a kernel that imported them itself they would hold its
    streams, which send what they are given to the notebook; the forked kernel's get them once it has made
    its streams. Left on the process's stderr (the kernel's launcher's, the runner's terminal), their records
    (e.g. transformers' load report) reached the notebook only through ipykernel's capture of the descriptor,
    which echoes what it captures to the terminal too."""
    loggers = [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values()
                                      if isinstance(v, logging.Logger))]
    streams = {id(sys.__stdout__): "stdout", id(sys.__stderr__): "stderr"}
    return [(h, streams[id(h.stream)]) for lg in loggers for h in lg.handlers
            if type(h) is logging.StreamHandler and id(h.stream) in streams]


def _options(argv: list[str]) -> argparse.Namespace:
    """The kernel server's command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m neuronkit.kernels.fork_server")
    parser.add_argument("fd", type=int, help="the listening socket's descriptor")
    parser.add_argument("dir", help="the server's directory, removed when it is done")
    parser.add_argument("parent", type=int, help="the pid whose end ends the server")
    parser.add_argument("--stage-modules", action="store_true", help="import IDLE_IMPORTS while idle")
    return parser.parse_args(argv)


def serve(role: Role, fd: int, folder: str, parent: int) -> None:
    """Import, then serve `role` on the listening socket whose descriptor is `fd` (bound before this process
    started, so connections have queued meanwhile); when done, remove directory `folder` (socket and
    kernelspec), which a runner killed outright could not. The runner's pid is `parent`, not this process's
    parent as it reads at start-up: a runner gone before then would leave it orphaned from the start, and it
    would serve forever. Never returns: a forked child becomes what the role makes of it, the server exits."""
    imported_under = dict(os.environ)
    listener = socket.socket(fileno=fd)
    request = None
    if _preload(parent, role) and role.ready():
        os.register_at_fork(after_in_parent=lambda: AT_FORK.append(threads()))
        request = _serve(listener, imported_under, parent, role)
    if request is None:  # the server is done: skip tearing down torch & co. (seconds under load)
        shutil.rmtree(folder, ignore_errors=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    role.become(request)
    os._exit(0)


def main(argv: list[str]) -> int:
    """The kernel server: `--stage-modules` imports IDLE_IMPORTS while idle (a workbook run's server, whose
    later kernels run the stage notebooks)."""
    options = _options(argv)
    serve(Role(options.stage_modules), options.fd, options.dir, options.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
