"""The Jupyter kernels the notebooks run on: kernelspec `neuronkit` (this environment's Python), started
one notebook ahead so that kernel start-up and imports overlap the previous notebook's work; on Linux
each one forked from a process that imported the libraries once (`fork_server`, neuronkit.kernels.fork_server).
`KernelStarter` is the one interface to the three ways (KERNEL_MODES).

papermill and nbval start the kernel a notebook names; a kernel that resolves to another interpreter
would import another torch (papermill#625), so the runner installs this one into `sys.prefix` when it is
missing, exactly as `python -m ipykernel install --sys-prefix --name neuronkit` does.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
from typing import Any

from neuronkit.errors import NeuronkitInputError
from neuronkit.kernels import fork_server as server_module

KERNEL_NAME = "neuronkit"
DISPLAY_NAME = "Python (neuronkit)"
# Defaults of the kernels' environment. OMP_WAIT_POLICY=PASSIVE: torch's OpenMP threads sleep between
# parallel regions instead of spinning; on a busy machine spinning threads starve each other (an 8-step CPU
# training loop of the bundled model: 4.7 s spinning, 0.1 s passive, at load average 5 on 2 cores). Host
# timing only; no result changes.
KERNEL_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
              "TQDM_DISABLE": "1", "OMP_WAIT_POLICY": "PASSIVE"}
# Fork servers started by `start_early`, by kernel name, with the environment they import under.
_EARLY: dict[str, tuple[dict[str, str], Any]] = {}


def kernel_env() -> dict[str, str]:
    """The environment the kernels get: this process's, over KERNEL_ENV's defaults."""
    return {**KERNEL_ENV, **os.environ}


def ensure_kernel(name: str = KERNEL_NAME) -> str | None:
    """Install kernel `name` for this interpreter unless Jupyter already knows it; return the new
    kernelspec's directory, or None when it was already there."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(name)
        return None
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    return install(kernel_name=name, display_name=DISPLAY_NAME, prefix=sys.prefix)


# What every notebook imports first. A warm kernel has imported it before its notebook starts, which is
# most of a notebook's start-up (import torch alone is seconds); importing creates no model or device
# state, so each notebook still starts from a fresh process exactly as it would in JupyterLab.
PRELOAD = ("import torch, transformers, pandas, matplotlib.pyplot, neuronkit.models, neuronkit.workbook.display, "
           "neuronkit.workbook.lesson")


def start_early(argv: list[str]) -> None:
    """Start the fork server `neuronkit run ARGV` will use, before this process imports torch: the server's
    imports (seconds) then overlap this process's own and its checks. The `KernelStarter` of the run adopts
    it; one left unused (bad input) is stopped when this process exits. Imports nothing beyond the standard
    library and jupyter_client's kernelspec."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--kernel", default=KERNEL_NAME)
    early.add_argument("--kernels", default="fork")
    known, _ = early.parse_known_args(argv)
    if known.kernels == "fork" and known.kernel not in _EARLY:
        env = kernel_env()
        server = fork_server(known.kernel, env, stage_modules=True)
        if server is not None:
            _EARLY[known.kernel] = (env, server)
            atexit.register(_close_early)


def _close_early() -> None:
    """Stop the fork servers `start_early` started that no run adopted."""
    while _EARLY:
        _, server = _EARLY.popitem()[1]
        server.close()


def fork_server(name: str, env: dict[str, str], stage_modules: bool = False) -> Any:
    """A started fork server (`neuronkit.kernels.fork_server.ForkServer`) for kernel `name`, importing under
    environment `env` (the kernels' own), or None where kernels cannot fork or `name` is another
    interpreter's kernel (the fork server can only fork this one). `stage_modules`: it also imports what the
    stage notebooks import, while idle (a workbook run's kernels)."""
    if not server_module.available() or not _runs_this_python(name):
        return None
    try:
        return server_module.ForkServer(name, DISPLAY_NAME, env, stage_modules)
    except OSError:  # e.g. a TMPDIR too long for a unix socket's path: warm kernels serve instead
        return None


def _runs_this_python(name: str) -> bool:
    """Whether kernel `name` runs this interpreter (a missing one will be installed for it)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        command = KernelSpecManager().get_kernel_spec(name).argv[0]
    except NoSuchKernel:
        return True
    if command in ("python", "python3"):  # jupyter_client runs these as sys.executable
        return True
    # An environment is its bin/ directory: the kernelspec says `.venv/bin/python`, while the `neuronkit`
    # console script runs `.venv/bin/python3.11` (resolving symlinks would match every venv of one Python).
    return os.path.dirname(os.path.abspath(command)) == os.path.dirname(os.path.abspath(sys.executable))


# How each notebook's kernel starts (`neuronkit run --kernels`, `run_workbook(kernels=...)`): forked from a
# process that imported the libraries once, one notebook ahead (where kernels cannot fork: as `warm`); a
# fresh interpreter each, one notebook ahead; or started by papermill when its notebook begins.
KERNEL_MODES = ("fork", "warm", "cold")


class KernelStarter:
    """The kernels of a sequence of notebooks, started the `mode` way (one of KERNEL_MODES).

    Made before the caller's own checks, so that a fork server's imports (seconds) overlap them; `start()`
    starts the first kernels once the notebooks are sure to run; `take()` gives each notebook's kernel
    manager in turn (None: papermill starts the kernel itself), to be stopped with `shutdown`; `close()`
    stops whatever is left, the fork server included. `env` is the kernels' environment.
    """

    def __init__(self, mode: str, name: str, env: dict[str, str]) -> None:
        if mode not in KERNEL_MODES:
            raise NeuronkitInputError(f"kernels must be one of {', '.join(KERNEL_MODES)}, got {mode!r}")
        self.mode, self._name = mode, name
        self._server = (_adopt_early(name, env) or fork_server(name, env, stage_modules=True)) if mode == "fork" else None
        self._warm: WarmKernels | None = None

    def start(self, cwd: str, arguments: list[str], count: int) -> None:
        """Start the kernels of `count` notebooks run in `cwd` with kernel `arguments` (none when `cold`)."""
        if self.mode != "cold":
            specs = self._server.kernel_spec_manager if self._server else None
            self._warm = WarmKernels(self._name, cwd, arguments, count, kernel_spec_manager=specs)

    def take(self) -> Any:
        """The next notebook's started kernel manager, or None when papermill is to start it."""
        return self._warm.take() if self._warm else None

    def close(self) -> None:
        """Stop the kernels never taken, then the fork server (which kills any kernel it still serves);
        once done, closing again does nothing."""
        warm, server, self._warm, self._server = self._warm, self._server, None, None
        try:
            if warm:
                warm.close()
        finally:
            if server:
                server.close()


def _adopt_early(name: str, env: dict[str, str]) -> Any:
    """The fork server `start_early` started for kernel `name`, or None. One whose environment differs from
    `env` (beyond the per-kernel variables the server ignores) would decline every kernel: it is stopped
    instead."""
    early, server = _EARLY.pop(name, ({}, None))
    if server is not None and server_module.differences(early, env):
        server.close()
        return None
    return server


class WarmKernels:
    """Kernels started one notebook ahead: while notebook N runs, notebook N+1's kernel starts and
    imports PRELOAD, so the workbook pays kernel start-up and imports mostly in parallel with the work.
    The first kernel, which no notebook runs before, preloads nothing: its notebook would wait for imports
    it may not need (notebook 00 imports no pandas), and imports what it does need itself.

    `take()` returns the next started kernel manager (the caller shuts it down with `shutdown` when its
    notebook is done) and keeps `ahead` more started; `close()` shuts down any kernel never taken.
    """

    def __init__(self, name: str, cwd: str, arguments: list[str], count: int, ahead: int = 1,
                 kernel_spec_manager: Any = None) -> None:
        self._name, self._cwd, self._arguments = name, cwd, arguments
        self._remaining, self._ahead, self._specs = count, ahead, kernel_spec_manager
        self._ready: list[Any] = []
        for n in range(min(ahead + 1, count)):  # the first notebook's kernel and the ones ahead of it
            self._start(preload=n > 0)

    def _start(self, preload: bool = True) -> None:
        from jupyter_client.manager import AsyncKernelManager
        from jupyter_core.utils import run_sync

        km = AsyncKernelManager(kernel_name=self._name, **({"kernel_spec_manager": self._specs} if self._specs else {}))
        arguments = [*self._arguments, f"--IPKernelApp.exec_lines={PRELOAD}"] if preload else self._arguments
        run_sync(km.start_kernel)(extra_arguments=arguments, cwd=self._cwd)
        self._ready.append(km)
        self._remaining -= 1

    def take(self) -> Any:
        """The next notebook's kernel manager, already started; tops the kernels ahead up to `ahead`."""
        km = self._ready.pop(0)
        while self._remaining > 0 and len(self._ready) < self._ahead:
            self._start()
        return km

    def close(self) -> None:
        """Shut down the kernels started but never taken."""
        while self._ready:
            shutdown(self._ready.pop())


def shutdown(km: Any) -> None:
    """Stop a kernel a notebook used (or never used), whatever state it is in."""
    from jupyter_core.utils import run_sync

    try:
        if run_sync(km.is_alive)():
            run_sync(km.shutdown_kernel)(now=True)
    finally:
        run_sync(km.cleanup_resources)()
