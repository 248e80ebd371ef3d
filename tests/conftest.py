"""Shared fixtures: offline Hugging Face, the bundled model, the architecture zoo, fresh-process runs, and
the check that every plot of every notebook a test executes is an image."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path
from typing import Iterator

import nbformat
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
# The notebook kernels' OpenMP wait policy (neuronkit.kernels.starter.KERNEL_ENV), read by libgomp when torch
# loads, for every process of the session: so that the torchrun ranks a notebook starts (07) have the rank
# server's start-up environment too and are forked (below). It decides only whether idle OpenMP threads spin
# or sleep, never a result.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _load_data_script(name: str):
    """data/<name>.py as a module (a script beside the data, not part of the package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "data" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def _load_zoo_builder():
    """data/build_zoo.py as a module."""
    return _load_data_script("build_zoo")


@functools.cache
def __getattr__(name: str):
    """The names tests import from here that need torch, transformers or neuronkit, made on first use: pytest-xdist's
    controller process loads this file too and runs no test, so it never pays those imports (~8 CPU-s, before
    the workers start)."""
    if name == "TINY_QWEN3":
        from neuronkit.resources import data_dir

        return data_dir() / "models" / "tiny-qwen3"
    if name == "ZOO_BUILDER":
        return _load_zoo_builder()
    if name == "ZOO_RECIPES":
        return _load_zoo_builder().recipes()
    if name == "SWEEP":  # the architecture sweep, data/sweep.py
        return _load_data_script("sweep")
    if name == "TwoLayerMLP":
        from tiny_models import TwoLayerMLP

        return TwoLayerMLP
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- torchrun's worker processes (ranks) forked from one warm server -----------------------------------------
# torchrun starts each rank as `[os.getenv("PYTHON_EXEC", sys.executable), "-u", script-or-"-m module", ...]`
# (torch/distributed/run.py; accelerate's launcher goes through the same config). For the whole session,
# PYTHON_EXEC is a stand-in for the interpreter that asks one server, which imported RANK_IMPORTS once (without
# the device), to fork the rank (tests/kernels/rank_server.py: the notebooks' kernel fork server with a role that
# forks commands); each rank loads the device itself, reading its own environment, and runs as `python -u ...`
# would (tests/kernels/interpreter.py). A rank whose environment differs from the server's
# other than in RANK_MAY_DIFFER (read when used, not when imported), or any command the server cannot stand
# in for, runs in a real interpreter; the server notes each fork and decline in its log (counted at the end
# of the session). Opt out by setting PYTHON_EXEC yourself (e.g. to .venv/bin/python): it is left as it is.
#
# torch, dynamo, DTensor, transformers (which imports accelerate) and the classes the ranks' tiny-qwen3
# resolves to: a forked rank that loads tiny-qwen3 costs 0.7 CPU-s past the fork, 3.0 with only the first
# three preloaded. None of them looks at the registered devices when imported (transformers' and
# accelerate's neuron checks run when called; the availability checks cached at import are CUDA's, XPU's,
# NPU's, MPS's and XLA's) or leaves a thread. What the device changes in them when it installs, it changes
# also where they were imported before it (neuronkit.placement's device_map bridge).
RANK_IMPORTS = ("torch", "torch._dynamo", "torch.distributed.tensor", "transformers", "transformers.modeling_utils",
                "transformers.models.auto.modeling_auto", "transformers.models.qwen3.modeling_qwen3")
# torchrun's per-worker variables (torch/distributed/elastic/agent/server/local_elastic_agent.py `_start_workers`,
# elastic/multiprocessing/api.py: TORCHELASTIC_ERROR_FILE), the device's and runtime's (read when the device
# is installed, in the rank), pytest's per-test ones, and the two `accelerate launch` sets that accelerate reads
# when its state is made (ACCELERATE_MIXED_PRECISION, ACCELERATE_DYNAMO_*). None is read while RANK_IMPORTS
# are imported (checked by tracing os.environ's reads during those imports, torch 2.13.0, transformers
# 5: they read TORCHINDUCTOR_*, TORCHDYNAMO_*, TORCH_COMPILE_*, SYMPY_*, HF_*, TRANSFORMERS_*, tqdm's TQDM_*,
# and accelerate's ACCELERATE_LOG_LEVEL, ACCELERATE_USE_MEGATRON_LM, ACCELERATE_ENABLE_RICH: those stay equal).
# A rank a notebook starts (07) has its kernel's variables besides: jupyter_client's (JPY_), the tests' kernelspec
# folder (JUPYTER_PATH), matplotlib's inline backend (MPLBACKEND: matplotlib is not imported), debugpy's
# (PYDEVD_: not imported) and the terminal ipykernel declares (TERM, CLICOLOR, CLICOLOR_FORCE, FORCE_COLOR,
# PAGER, GIT_PAGER): none is read while RANK_IMPORTS are imported (TERM only passes through tqdm's scan).
# Besides, the terminal's size, COLUMNS and LINES, which pytest-xdist's workers have and its controller has not:
# read when shutil.get_terminal_size is called, and while imported only by accelerate/commands/menu/helpers.py
# (the width of `accelerate config`'s interactive menu, which no rank shows). And TOKENIZERS_PARALLELISM, which
# transformers' generate() writes into the test process's environment (generation/utils.py) after a test that
# compiles generation: tokenizers reads it each time it might parallelise (utils/parallelism.rs
# `get_parallelism`), never when imported; without it, every rank after such a test ran in a real interpreter.
# And NEURONKIT_STAGES, a stage table of one's own, read when neuronkit.pipeline is imported (a rank imports it).
# And PYTORCH_NVML_BASED_CUDA_CHECK, which importing Lightning sets in the test process (lightning/fabric/__init__.py):
# torch reads it only when asked whether CUDA is available, which a CPU build answers without reading it, and a
# CUDA build on a machine with no GPU answers alike either way.
# And KMP_DUPLICATE_LIB_OK and KMP_INIT_AT_FORK, which importing scikit-learn (sentence-transformers imports it),
# joblib or threadpoolctl sets in the test process: only Intel's and LLVM's OpenMP runtimes read them, when loaded,
# and the venv has neither (torch's CPU build loads GNU libgomp). Without it every forked snippet and rank after
# tests/clients/test_model_libraries.py's sentence-transformers test, on that worker, was declined.
RANK_MAY_DIFFER = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                   "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_",
                   "TORCH_NCCL_", "NEURON", "TORCH_NEURONX_", "PYTEST_", "ACCELERATE_MIXED_PRECISION",
                   "ACCELERATE_DYNAMO_", "COLUMNS", "LINES", "JPY_", "JUPYTER_PATH", "MPLBACKEND", "PYDEVD_", "TERM",
                   "CLICOLOR", "FORCE_COLOR", "PAGER", "GIT_PAGER", "TOKENIZERS_PARALLELISM", "NEURONKIT_STAGES",
                   "PYTORCH_NVML_BASED_CUDA_CHECK", "KMP_")
# Where the session's server notes its forks and declines (its path exported with PYTHON_EXEC).
RANK_LOG = "NEURONKIT_TEST_RANKS_LOG"
# torchrun gives every rank OMP_NUM_THREADS=1 when it starts more than one per node (libgomp reads it when torch
# loads): the server imports under it, and a rank with another value runs in a real interpreter.
RANK_ENV = {"OMP_NUM_THREADS": "1"}


@functools.cache
def _rank_server():
    """tests/kernels/rank_server.py loaded by path (its folder is not on the tests' path): it loads the package's
    fork server by path in turn, as importing the package would import torch, which pytest-xdist's controller
    never pays for (`__getattr__` above); both need only the standard library."""
    spec = importlib.util.spec_from_file_location("_rank_server", ROOT / "tests" / "kernels" / "rank_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_rank_server(log: Path, env: dict[str, str]):
    """A started CommandServer forking ranks under `env` (with RANK_ENV), noting its forks and declines in `log`."""
    return _rank_server().CommandServer({**env, **RANK_ENV}, RANK_IMPORTS, RANK_MAY_DIFFER, str(log))


_RANK_SERVER: list = []  # the session's, in the process that started it


def pytest_configure(config: pytest.Config) -> None:
    """In the session's first process (xdist's controller, or the only one with `-n 0`): start the rank server
    and export PYTHON_EXEC before the workers start, so that they and every process they start (notebook
    kernels, whose environment is a copy) inherit it. Where ranks cannot fork (not Linux), or PYTHON_EXEC is
    set already, nothing changes."""
    if hasattr(config, "workerinput") or "PYTHON_EXEC" in os.environ or not _rank_server().available():
        return
    log = Path(tempfile.gettempdir()) / f"neuronkit-ranks-{os.getpid()}.log"
    log.write_text("")
    os.environ[RANK_LOG] = str(log)
    server = start_rank_server(log, dict(os.environ))
    os.environ["PYTHON_EXEC"] = server.executable
    _RANK_SERVER.append(server)


def pytest_terminal_summary(terminalreporter) -> None:
    """How many ranks the session's server forked and declined, and where its log is."""
    if _RANK_SERVER:
        log = Path(os.environ[RANK_LOG])
        lines = log.read_text().splitlines()
        forked, declined = (sum(f" {word}" in line for line in lines) for word in ("forked ", "declined: "))
        terminalreporter.write_line(f"PYTHON_EXEC (torchrun's ranks): {forked} forked from the warm server, {declined} in a real "
                                    f"interpreter (PYTHON_EXEC's log: {log})")


def rank_server_noted(marker: str, lines: bool = False) -> list[str]:
    """What the session's rank server did with the commands whose arguments contain `marker`, in order
    ("forked", "declined"), or (`lines`) its log lines about them."""
    noted = [line for line in Path(os.environ[RANK_LOG]).read_text().splitlines() if marker in line]
    return noted if lines else [line.split(":")[0].split()[1] for line in noted]


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the rank server with the session (a pytest killed outright: the server exits when its pid is gone)."""
    while _RANK_SERVER:
        _RANK_SERVER.pop().close()
        os.environ.pop("PYTHON_EXEC", None)


@pytest.fixture(scope="session")
def zoo(tmp_path_factory) -> dict[str, Path]:
    """Every checkpoint of the architecture zoo (data/zoo.toml), built once per session (~1 s)."""
    return _load_zoo_builder().build_zoo(tmp_path_factory.mktemp("zoo"))


# What a kernel of ForkedKernels is launched without: pytest's per-test variables (PYTEST_CURRENT_TEST, and in a
# pytest run by a test, PYTEST_VERSION), and the Jupyter folders a test gives a Jupyter server of its own
# (tests/notebooks/test_jupyterlab.py: nothing of the user's ~/.jupyter), which the kernel does not read.
KERNEL_UNSET = ("PYTEST_CURRENT_TEST", "PYTEST_VERSION", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR")


class ForkedKernels:
    """The project's kernel (`neuronkit`) forked from one process that imported the libraries once
    (neuronkit.kernels.fork_server: how `neuronkit run` starts kernels by default), for the notebooks tests
    execute themselves: each kernel is still a fresh process; the imports (seconds each) are paid once.

    `km(cwd)` is a started kernel manager for `papermill.execute_notebook(km=...)`, to be stopped with
    `neuronkit.kernels.starter.shutdown`; a process run with `env` (nbval) finds kernel `neuronkit` forked
    too. A kernel started with another environment is declined by the server and starts the ordinary way."""

    def __init__(self, folder: Path) -> None:
        from neuronkit.kernels.starter import KERNEL_ENV, KERNEL_NAME, fork_server

        # pytest sets PYTEST_CURRENT_TEST (and a pytest run by a test, PYTEST_VERSION) per test: the kernels
        # are launched without them, so that every kernel's environment is the one the server imported under.
        self.env = {**KERNEL_ENV, **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
                    "JUPYTER_PATH": str(folder)}
        self._server = fork_server(KERNEL_NAME, self.env)
        self._specs = self._server.kernel_spec_manager if self._server else None
        if self._specs is not None:
            forked = self._specs.get_kernel_spec(KERNEL_NAME)
            target = folder / "kernels" / KERNEL_NAME
            target.mkdir(parents=True)
            argv = ["env", *(f"--unset={k}" for k in KERNEL_UNSET), *forked.argv]
            (target / "kernel.json").write_text(json.dumps({**forked.to_dict(), "argv": argv}))

    def km(self, cwd: Path):
        """A started kernel manager for kernel `neuronkit` in `cwd`."""
        from jupyter_client.manager import AsyncKernelManager
        from jupyter_core.utils import run_sync

        from neuronkit.kernels.starter import KERNEL_NAME, ensure_kernel
        from neuronkit.workbook.runner import KERNEL_ARGUMENTS

        ensure_kernel()
        km = AsyncKernelManager(kernel_name=KERNEL_NAME, **({"kernel_spec_manager": self._specs} if self._specs else {}))
        run_sync(km.start_kernel)(extra_arguments=KERNEL_ARGUMENTS, cwd=str(cwd), env=self.env)
        return km

    def close(self) -> None:
        if self._server:
            self._server.close()


@pytest.fixture(scope="session")
def forked_kernels(tmp_path_factory) -> Iterator[ForkedKernels]:
    """One fork server for the session's notebook executions (ForkedKernels); its tests share a worker
    (SHARED_SESSION_FIXTURES), so that it is started once."""
    kernels = ForkedKernels(tmp_path_factory.mktemp("jupyter"))
    yield kernels
    kernels.close()


# --- parallel runs (pytest-xdist: pyproject's addopts run `-n 2 --dist loadgroup`) -------------------------
# Each worker is its own pytest session: a session- or module-scoped fixture is built by every worker that
# runs a test needing it. So that an expensive one is built once, its tests are put in one xdist group (one
# worker runs a group, in collection order):
# - every test using a module- or class-scoped fixture is grouped with the rest of its module, automatically;
# - a session fixture named here groups the tests using it (a test in two groups runs with both at once).
# A new expensive session fixture: add its name here. Cheap ones (the zoo, ~1 s) are built per worker.
# A test that needs anything else to run on one worker with others: `@pytest.mark.xdist_group("name")`.
SHARED_SESSION_FIXTURES = ("forked_kernels",)


def pytest_itemcollected(item: pytest.Item) -> None:
    """Put a test sharing an expensive fixture in its group (above): before xdist reads the groups."""
    fixtures = getattr(item, "_fixtureinfo", None)
    for name in item.fixturenames if fixtures is not None else ():
        if {d.scope for d in fixtures.name2fixturedefs.get(name, ())} & {"module", "class"}:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
        elif name in SHARED_SESSION_FIXTURES:
            item.add_marker(pytest.mark.xdist_group(name))


# Modules of in-process checks that take 5-25 s a test (whole models through every stage): first too.
LONG_MODULES = ("test_more_architectures", "test_zoo")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules with notebook executions, fresh processes or whole-model checks first, so that no long
    test starts last while the other worker idles (whole modules move: their fixtures are still built once)."""
    heavy = {item.module for item in items if item.get_closest_marker("notebooks") or item.get_closest_marker("subprocess")
             or item.module.__name__.rpartition(".")[2] in LONG_MODULES}
    items.sort(key=lambda item: item.module not in heavy)


@pytest.fixture
def run_python(tmp_path):
    """Run a snippet in a fresh interpreter with extra environment variables; returns the process. For what is
    decided while torch is imported (autoload, its switch, an import order); else `forked_python` (~3 CPU-s less)."""

    def run(code: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
        full_env = {**os.environ, "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "neff"), **(env or {})}
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                              text=True, timeout=300, cwd=ROOT)
        if check and proc.returncode != 0:
            raise AssertionError(f"snippet failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run


@pytest.fixture(scope="session")
def _snippet_env() -> dict[str, str]:
    """The environment snippets start from: this process's when the first one runs (the test process's own
    changes since, e.g. transformers' generate() setting TOKENIZERS_PARALLELISM, would otherwise decide
    whether a snippet is forked by which tests ran before it), as torchrun's ranks have it (RANK_ENV)."""
    return {**os.environ, **RANK_ENV}


@pytest.fixture
def forked_python(_snippet_env, tmp_path):
    """`run_python`'s twin for a snippet whose subject is the device's state in a new process, not the
    interpreter's start: the same snippet, environment and checks, run through PYTHON_EXEC as a rank is, so
    forked from the session's rank server (which imported torch without its device): the child loads the device
    as `import torch` would and creates its state afresh, reading the variables it was given. A snippet the
    server declines (a variable read while torch is imported) is an error of the test: use `run_python`."""

    def run(code: str, env: dict[str, str] | None = None, check: bool = True,
            cwd: Path = ROOT) -> subprocess.CompletedProcess:
        full_env = {**_snippet_env, "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "neff"), **(env or {})}
        marker = uuid.uuid4().hex  # sys.argv[1], naming the snippet in the server's log
        proc = subprocess.run([os.environ.get("PYTHON_EXEC", sys.executable), "-u", "-c", textwrap.dedent(code), marker],
                              env=full_env, capture_output=True, text=True, timeout=300, cwd=cwd)
        if RANK_LOG in os.environ and rank_server_noted(marker) != ["forked"]:
            raise AssertionError(f"cannot fork this snippet: {rank_server_noted(marker, lines=True)}")
        if check and proc.returncode != 0:
            raise AssertionError(f"snippet failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches and counters reset around a test that compiles."""
    import torch._dynamo

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# A figure that reached the notebook as its text repr only (no image formatter: the inline backend not
# hooked into the kernel's shell), or a plt.show() on a non-interactive backend (a warning, no output).
_FIGURE_TEXT = re.compile(r"^<Figure size \d+x\d+ with \d+ Axes>$")
_NOT_SHOWN = "is non-interactive, and thus cannot be shown"


def unrendered_plots(notebook: Path) -> tuple[int, list[str]]:
    """An executed notebook's plotting cells, counted, and those among them without an image/png output.

    A plotting cell is a cell that ran to completion and calls `plt.show()` unconditionally (at the top
    level of the cell), or whose outputs show a figure some other way (its text repr, the warning of a
    backend that cannot show). A conditional plot whose branch did not run is no plotting cell."""
    nb = nbformat.read(notebook, as_version=4)
    plotting, missing = 0, []
    for number, cell in enumerate((c for c in nb.cells if c.cell_type == "code"), 1):
        # papermill marks even the cells after a timed-out one completed: only an execution count says it ran
        if cell.execution_count is None or cell.metadata.get("papermill", {}).get("status") != "completed":
            continue
        outputs = cell.get("outputs", [])
        texts = [o.get("data", {}).get("text/plain", "") for o in outputs] + [o.get("text", "") for o in outputs]
        if not (re.search(r"^plt\.show\(\)", cell.source, re.M) or any(_FIGURE_TEXT.match(t) for t in texts)
                or any(_NOT_SHOWN in t for t in texts)):
            continue
        plotting += 1
        if not any("image/png" in o.get("data", {}) for o in outputs):
            missing.append(f"{notebook.name} code cell {number}: {' | '.join(t.strip() for t in texts if t.strip())[:200]}")
    return plotting, missing


def executed_notebooks(folder: Path) -> list[Path]:
    """The notebooks under `folder` that papermill executed (its metadata), at any depth."""
    return [path for path in sorted(folder.rglob("*.ipynb")) if "papermill" in nbformat.read(path, as_version=4).metadata]


@pytest.fixture(autouse=True)
def _every_plot_of_an_executed_notebook_is_an_image(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each `notebooks` test: every plotting cell of every notebook it executed into its tmp_path
    (whichever notebook, whichever way its kernel started) has an image/png output (issue 21)."""
    checked = request.node.get_closest_marker("notebooks") is not None and "tmp_path" in request.fixturenames
    folder = request.getfixturevalue("tmp_path") if checked else None  # now, so it outlives this teardown
    yield
    if folder is None:
        return
    missing = [line for path in executed_notebooks(folder) for line in unrendered_plots(path)[1]]
    assert not missing, "plots without an image:\n" + "\n".join(missing)
