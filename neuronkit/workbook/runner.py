"""`run_workbook`: execute notebooks 00..06 with papermill against one model and leave a run directory.

Each notebook runs in a fresh `neuronkit` kernel with the notebooks folder as its working directory,
and its executed copy lands in `OUT/artifacts/notebooks/`. When a notebook fails, its stage gets an
`error` record. A stage notebook runs once the stages it requires (neuronkit/data/stages.toml) have
ended, and only when they passed or warned; otherwise it is not executed and its stage gets a `skipped`
record naming the first of them that did not (`eager failed (fail: ...)`). Stages that do not require each
other run side by side on a machine with two cores (the op audit beside the CPU baseline and eager parity,
profiling beside compile) when the full model runs and two copies of it fit the memory budget; a large
checkpoint's stages (on a layer slice, which fills the budget) take turns. Side by side, compile's notebook
starts with the first one (its cells compile the model, the longest step; stages.toml's `starts_after`), and
its stage cell (tagged `stage`) is sent to its kernel once eager has ended. The report notebook runs last and
is rendered whatever happened.

A run cannot hang: every cell has a time limit (`cell_timeout`), the kernel must start within
`start_timeout`, and nbclient checks every second that the kernel process is alive. A cell over its
limit, a dead kernel or a kernel that never started is that notebook's error, named in one line.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from neuronkit.errors import NeuronkitInputError
from neuronkit.evidence import ModelSlice
from neuronkit.kernels.starter import KERNEL_ENV, KERNEL_NAME, KernelStarter, ensure_kernel, kernel_env, shutdown
from neuronkit.pipeline.config import DEFAULTS, Params, RunConfig
from neuronkit.pipeline.flow import blocked_by, skip
from neuronkit.pipeline.record import RunDir, SpelledOnce, StageResult, first_line, now
from neuronkit.pipeline.session import hand_over
from neuronkit.pipeline.stage import REPORT_NOTEBOOK as REPORT_STEM, STAGE, WORKBOOK, Stage
from neuronkit.resources import notebooks_dir
from neuronkit.run_command import RUN_OPTIONS
from neuronkit.workbook.params import UNDERWAY, check_declared_types, on_random_weights, validate, weightless

# The stage notebooks in order (neuronkit/data/stages.toml), then the report notebook, which writes no record.
REPORT_NOTEBOOK = f"{REPORT_STEM}.ipynb"
NOTEBOOKS: tuple[str, ...] = (*(stage.ipynb for stage in WORKBOOK), REPORT_NOTEBOOK)
# Notebook parameters naming files (besides `model`): made absolute, as the kernels run in the notebooks folder.
PATH_PARAMETERS = ("prompts_file",)
# The kernels' own log (transport warnings, shutdown noise) would interleave with the progress lines;
# what a notebook does is in its executed copy, errors included.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=CRITICAL"]
# The tag of the cell that runs a stage notebook's stage (`result = <module>.run(params, ...)`).
STAGE_TAG = "stage"
# Seconds one cell may run (the bundled models' slowest takes ~10 s) and a kernel may take to start.
CELL_TIMEOUT_S = 600
START_TIMEOUT_S = 120


@dataclass
class NotebookRun:
    """How one notebook went: its stage's status (`ok`/`error` for the report notebook) and wall time; a
    notebook not executed because a stage it requires did not pass is `skipped`, with the reason."""

    notebook: str
    status: str
    seconds: float
    output: Path | None  # the executed copy (None: not executed)
    error: str | None = None
    reason: str | None = None  # why it was skipped


@dataclass(frozen=True)
class Execution:
    """How the notebooks are executed: how each one's kernel starts (`kernels`: `fork`, the default, forked
    from one process that imported the libraries once, while the previous notebook runs (Linux; elsewhere
    `warm`); `warm`, a fresh interpreter started then; `cold`, by papermill when its notebook begins:
    `neuronkit.kernels.starter`), the Jupyter kernel, the seconds a cell may run and a kernel may take to
    start, and the notebooks folder (default: the package's)."""

    kernels: str = "fork"
    kernel_name: str = KERNEL_NAME
    cell_timeout: int = CELL_TIMEOUT_S
    start_timeout: int = START_TIMEOUT_S
    notebooks: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        for name, value in (("cell_timeout", self.cell_timeout), ("start_timeout", self.start_timeout)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise NeuronkitInputError(f"{name} must be a positive number of seconds, got {value!r}")


@dataclass
class WorkbookResult:
    """The run directory, one entry per executed notebook, and the rendered report."""

    run_dir: Path
    notebooks: list[NotebookRun] = field(default_factory=list)
    report_html: Path | None = None

    @property
    def ok(self) -> bool:
        """True when every notebook executed without an error."""
        return all(nb.error is None for nb in self.notebooks)


def run_workbook(model: str | os.PathLike[str], out: str | os.PathLike[str], config: RunConfig = DEFAULTS, *,
                 parameters: dict[str, Any] | None = None, execution: Execution = Execution(),
                 overwrite: bool = False, random_weights: bool = False, log: Callable[[str], None] = print,
                 **options: Any) -> WorkbookResult:
    """Run the workbook on `model` (a bundled name or a checkpoint directory) into run directory `out`.

    `config` is the run configuration, `options` its parameters or its stages' options set by name
    (`dtype="bfloat16"`, `max_new_tokens=8`): each notebook gets the shared ones and its own stage's;
    `parameters`, any other notebook parameter. Bad parameters, and a checkpoint that cannot load, raise
    NeuronkitInputError before any kernel starts. A non-empty `out` is refused unless `overwrite`, which
    clears a previous run directory. `random_weights` runs the model on random weights, saved first into
    `out/random-weights/`. The preflight decides the layer slice that fits (`neuronkit.slicing`) and the
    example inputs once and hands both to the kernels. `execution`: how the notebooks run (`Execution`).
    """
    config = config.with_options(**options)
    # The kernels' starter first: a fork server's imports (seconds) overlap this process's checks and imports.
    starter = KernelStarter(execution.kernels, execution.kernel_name, kernel_env())
    try:
        return _run(model, out, config, parameters or {}, execution, overwrite, random_weights, log, starter)
    finally:
        starter.close()


def _run(model: str | os.PathLike[str], out: str | os.PathLike[str], config: RunConfig, parameters: dict[str, Any],
         execution: Execution, overwrite: bool, random_weights: bool, log: Callable[[str], None],
         starter: KernelStarter) -> WorkbookResult:
    """run_workbook's work, each notebook's kernel from `starter`."""
    import papermill

    folder = Path(execution.notebooks) if execution.notebooks is not None else notebooks_dir()
    params = _validate(_absolute(model), str(Path(out).resolve()), config, random_weights)
    decided = preflight(params, random_weights)
    shared = _with_absolute_paths({**params.to_dict(), "run_dir": params.run_dir,
                                   **({"random_weights": True} if random_weights else {}), **parameters})
    own = {stage.ipynb: _with_absolute_paths(_stage_values(config, stage)) for stage in WORKBOOK}
    options = {k: v for values in own.values() for k, v in values.items()}  # every stage's, where not default
    inspected = {name: papermill.inspect_notebook(str(_notebook(folder, name))) for name in NOTEBOOKS}
    declared = {name: set(found) for name, found in inspected.items()}
    given = {**options, **shared}
    known = set().union(*declared.values())
    if unknown := sorted(set(given) - known):
        raise NeuronkitInputError(f"unknown workbook parameter(s) {', '.join(unknown)}; the notebooks take: "
                                  f"{', '.join(sorted(known))}")
    check_declared_types({**options, **parameters},
                         {key: found[key]["inferred_type_name"] for found in inspected.values() for key in found})
    _empty_run_dir(Path(params.run_dir), overwrite)
    if random_weights:  # saved once, here; each notebook's parameters(random_weights=True) finds it
        params = _validate(on_random_weights(params).model, params.run_dir, config)
        shared["model"] = params.model
    hand_over(params, decided.model_slice, decided.inputs)
    if options or parameters:  # what params.json does not hold, so the report's command repeats this run
        params.run.write_side_record(RUN_OPTIONS, {**options, **parameters})
    if ensure_kernel(execution.kernel_name):
        log(f"installed Jupyter kernel {execution.kernel_name!r} for this Python")
    run = params.run
    result = WorkbookResult(run.path)
    with _kernel_environment():
        # Every check above has passed: only now do kernels start (each one notebook ahead unless cold).
        starter.start(str(folder), KERNEL_ARGUMENTS, len(NOTEBOOKS))
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="notebook")
        try:
            def execute(name: str, gate: threading.Event | None = None) -> Callable[[], NotebookRun]:
                """Take `name`'s kernel here; the returned call executes the notebook (on a pool thread), its
                stage cell once `gate` is open."""
                values = {k: v for k, v in {**own.get(name, {}), **shared}.items() if k in declared[name]}
                km = starter.take()

                def work() -> NotebookRun:
                    try:
                        return _execute(folder, name, run, values, execution, km, gate)
                    finally:
                        if km is not None:
                            shutdown(km)
                return work

            result.notebooks.extend(_execute_all(run, execute, log, pool, decided.side_by_side))
            result.notebooks.append(pool.submit(execute(REPORT_NOTEBOOK)).result())
        finally:
            starter.close()  # kills any kernel still running, so the pool's threads end at once
            pool.shutdown(cancel_futures=True)
    nb = result.notebooks[-1]
    log(_line(len(result.notebooks), nb))
    if nb.error:
        from neuronkit.reporting import report  # the report notebook failed: render without it

        report(run.path)
    result.report_html = run.path / "report.html"
    log(f"report: {result.report_html}")
    return result


def _validate(model: str, run_dir: str, config: RunConfig, random_weights: bool = False) -> Params:
    """The run's parameters, validated as a notebook validates its parameters cell, with `config`'s stage
    options kept (a random-weights checkpoint is not saved yet: the run directory is cleared first)."""
    params = validate(model, run_dir, **config.shared(), random_weights=random_weights)
    return Params(params.model, params.run_dir, config)


def _with_absolute_paths(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with the parameters that name files (PATH_PARAMETERS) made absolute."""
    return {k: _absolute(v) if k in PATH_PARAMETERS and isinstance(v, str) else v for k, v in values.items()}


def _stage_values(config: RunConfig, stage: Stage) -> dict[str, Any]:
    """The notebook parameters `stage`'s options give where `config` sets them otherwise than their defaults."""
    if stage.options is None:
        return {}
    options = config.of(stage.options)
    return {f.name: getattr(options, f.name) for f in fields(options) if getattr(options, f.name) != f.default}


def _execute_all(run: RunDir, execute: Callable[[str, threading.Event | None], Callable[[], NotebookRun]],
                 log: Callable[[str], None],
                 pool: ThreadPoolExecutor, side_by_side: bool) -> list[NotebookRun]:
    """Execute the stage notebooks, each once the stages it requires have ended, and return how each went
    in stage order (the progress lines come in that order too).

    A stage whose required stages did not all pass or warn is not executed (its cells would run on what
    failed): it gets a `skipped` record naming the cause, the stage model's decision (`flow.blocked_by`), as
    a notebook run by hand records it. Stages that do not require each other run side by side on two cores
    (the audit beside the CPU baseline and eager, profiling beside compile) when `side_by_side` (`preflight`:
    the full model runs and two copies of it fit the memory budget); otherwise one at a time, in stage order,
    within the budget a layer slice was chosen for. Side by side, a stage whose notebook's own cells need no
    record (stages.toml's `starts_after`: compile, whose cells compile the model) starts beside the stages it
    requires, one such stage at a time so the other core runs those. `execute` gets a gate for it, which opens
    once those have ended: its stage cell waits for it before it is sent to the kernel (so the wait is no part
    of the cell's time limit), then finds their records. When one of them did not pass, its notebook's run is
    discarded and its stage `skipped`, exactly as if it had waited to start."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    lanes = 2 if cores >= 2 and side_by_side else 1
    waiting, ended = list(WORKBOOK), {}
    running: dict[Future, Stage] = {}
    finished: dict[str, NotebookRun] = {}  # notebooks that ended before every stage they require did
    gates: dict[str, threading.Event] = {}  # of the stages started early: open once their requirements ended

    def unmet(stage: Stage) -> bool:
        return not all(r in ended for r in stage.requires)

    def start() -> bool:
        """Start (or skip) the stages that may start now; whether any did."""
        for stage in waiting:
            if not all(r in ended for r in (stage.starts_after if lanes > 1 else stage.requires)):
                continue
            early = unmet(stage)
            reason = None if early else blocked_by(run, stage.name)
            if reason:
                ended[stage.name] = _skipped(run, stage, reason)
            elif len(running) >= lanes or (early and sum(map(unmet, running.values())) >= lanes - 1):
                continue
            else:
                if early:
                    gates[stage.name] = threading.Event()
                running[pool.submit(execute(stage.ipynb, gates.get(stage.name)))] = stage
            waiting.remove(stage)
            return True
        return False

    def settle() -> bool:
        """End a notebook that finished once every stage it requires has ended; whether one did."""
        for stage in WORKBOOK:
            if stage.name not in finished or unmet(stage):
                continue
            nb = finished.pop(stage.name)
            reason = blocked_by(run, stage.name)
            if reason:  # it started early and a stage it requires did not pass: as if it had not started
                if nb.output is not None:
                    nb.output.unlink(missing_ok=True)
                ended[stage.name] = _skipped(run, stage, reason)
            else:
                if nb.error is None:
                    nb.status = _status(run, stage.name)
                else:
                    _record_failure(run, stage.name, nb)
                ended[stage.name] = nb
            return True
        return False

    logged = 0
    said = SpelledOnce()  # an error the stages meet alike (a refused op) is spelled out on its stage's line only
    # For the notebooks' first cells (`prerequisites`): a stage started before a record it requires exists
    # gets that record from this run, its stage cell waiting for it.
    run.write_side_record(UNDERWAY, {"stages": [stage.name for stage in WORKBOOK], "pid": os.getpid()})
    try:
        while True:
            while settle() or start():
                for name, gate in gates.items():
                    if not unmet(STAGE[name]):
                        gate.set()
            while logged < len(WORKBOOK) and WORKBOOK[logged].name in ended:
                logged += 1
                stage = WORKBOOK[logged - 1].name
                log(_line(logged, ended[stage], said, run.read(stage)))
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                finished[running.pop(future).name] = future.result()
    finally:
        (run.path / UNDERWAY).unlink(missing_ok=True)
        for gate in gates.values():  # a notebook is never left waiting (it is stopped with its kernel)
            gate.set()
    if waiting or finished:
        raise RuntimeError(f"stages {[s.name for s in waiting] + list(finished)} require stages that never run "
                           "(stages.toml)")
    return [ended[stage.name] for stage in WORKBOOK]


def _skipped(run: RunDir, stage: Stage, reason: str) -> NotebookRun:
    """Record `stage` as skipped for `reason`; its notebook is not executed."""
    skip(run, stage.name, reason)
    return NotebookRun(stage.ipynb, "skipped", 0.0, None, reason=reason)


@dataclass(frozen=True)
class Preflight:
    """What the runner's preflight decided, once for the run: whether two stages may hold the model side by
    side, the layer slice the stages run, and the example inputs they run on (handed to the kernels)."""

    side_by_side: bool
    model_slice: ModelSlice
    inputs: dict[str, torch.Tensor]


def preflight(params: Params, random_weights: bool = False) -> Preflight:
    """What the notebooks will need from the checkpoint, checked in seconds without loading a weight:
    readable weight files of the shapes config.json gives them (unless `random_weights`), a tokenizer
    that loads, an input recipe for its architecture, and a model or layer slice that fits the budget.
    Two stages may hold the model side by side when the full model runs (a layer slice is as large as the
    budget allows, by design) and twice its copies fit the budget."""
    from neuronkit import inputs, models, slicing

    config, model = params.config, params.model
    hf_config = models.load_config(model)
    torch_dtype = models.as_dtype(config.dtype)
    ran, piece = slicing.plan(hf_config, layers=config.layers or None, full_model=config.full_model, dtype=torch_dtype)
    if random_weights:
        models.num_parameters(hf_config)  # the class builds from this config
    elif not models.has_weights(model):
        raise NeuronkitInputError(weightless(model))
    else:
        models.check_weights(model)
        models.check_shapes(model)
    example = inputs.example_inputs(hf_config, models.load_tokenizer(model), config.batch_size, config.seq_len,
                                    processor=inputs.processor_config(model))
    twice = 2 * slicing.need_bytes(ran, torch_dtype, sliced=False)
    return Preflight(piece.full_model and twice <= slicing.memory_budget(), piece, example)


def _empty_run_dir(path: Path, overwrite: bool) -> None:
    """Refuse a non-empty run directory (a report mixing two runs), or clear a previous run's with `overwrite`."""
    if path.exists() and not path.is_dir():
        raise NeuronkitInputError(f"--out {path} is a file, not a directory; choose a new directory")
    if not path.is_dir() or not any(path.iterdir()):
        return
    if not overwrite:
        raise NeuronkitInputError(f"--out {path} is not empty; pass --overwrite (overwrite=True) to clear it "
                                  "first, or choose a new directory")
    if not (path / "params.json").is_file() and not (path / "stages").is_dir():
        raise NeuronkitInputError(f"--out {path} is not empty and is not a neuronkit run directory (no params.json "
                                  "or stages/): refusing to clear it; choose a new directory")
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _execute(folder: Path, name: str, run: RunDir, values: dict[str, Any], execution: Execution, km: Any = None,
             gate: threading.Event | None = None) -> NotebookRun:
    """Execute one notebook with papermill; whatever stops it becomes `error` text, never an exception. With
    `gate`, the cell tagged `stage` is sent to the kernel once the gate is open (nbclient's `on_cell_execute`
    hook runs before the cell's time limit starts)."""

    def before(cell: Any, cell_index: int) -> None:
        if gate is not None and STAGE_TAG in cell.metadata.get("tags", ()):
            gate.wait()

    import papermill
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from papermill.exceptions import PapermillExecutionError, strip_color

    output = run.artifact_dir("notebooks") / name
    start = time.perf_counter()
    error = None
    try:
        papermill.execute_notebook(str(_notebook(folder, name)), str(output), parameters=values,
                                   kernel_name=execution.kernel_name, cwd=str(folder), progress_bar=False,
                                   start_timeout=execution.start_timeout, execution_timeout=execution.cell_timeout,
                                   extra_arguments=KERNEL_ARGUMENTS, km=km, on_cell_execute=before)
    except PapermillExecutionError as exc:
        error = f"{exc.ename}: {exc.evalue}\n" + strip_color("\n".join(exc.traceback))
    except CellTimeoutError:
        error = (f"CellTimeoutError: {_running_cell(output)} was still running after the {execution.cell_timeout} s "
                 f"cell timeout (a stalled kernel, or a cell that needs longer: raise --cell-timeout)")
    except DeadKernelError:
        error = f"DeadKernelError: the kernel died during {_running_cell(output)} (out of memory, or a crash)"
    except Exception as exc:  # the kernel did not start, or papermill itself failed: still this notebook's error
        error = f"{type(exc).__name__}: {exc}".strip()
    return NotebookRun(name, "error" if error else "ok", time.perf_counter() - start, output, error)


def _running_cell(output: Path) -> str:
    """`code cell N ('first line')`: the last cell papermill started in the executed copy (it marks even
    a timed-out cell completed, so the start time is what tells)."""
    import nbformat

    try:
        nb = nbformat.read(output, as_version=4)
    except (OSError, ValueError):
        return "a cell"
    code = [c for c in nb.cells if c.cell_type == "code"]
    started = [n for n, c in enumerate(code, 1) if c.metadata.get("papermill", {}).get("start_time")]
    if not started:
        return "a cell"
    first = next((line for line in code[started[-1] - 1].source.splitlines() if line.strip()), "")
    return f"code cell {started[-1]} ({first[:60]!r})"


def _record_failure(run: RunDir, stage: str, nb: NotebookRun) -> None:
    """Give the failed notebook's stage an `error` record unless the stage already wrote one (its error text
    ends with the exception, the line the report's verdict quotes)."""
    existing = run.read(stage)
    if existing is not None and existing.status == "error":
        return
    run.write(StageResult(stage, "error", f"notebook {nb.notebook} failed: {nb.error.splitlines()[0]}",
                          existing.evidence if existing else None,
                          error=f"(executed notebook: {nb.output})\n{nb.error}", duration_s=nb.seconds,
                          finished_at=now()))


def _status(run: RunDir, stage: str) -> str:
    record = run.read(stage)
    return record.status if record else "no record"


def _line(index: int, nb: NotebookRun, said: SpelledOnce | None = None, record: StageResult[Any] | None = None) -> str:
    """One progress line: the notebook, its stage's status and time, and under it why a stage failed (`record`,
    its stage's record: the first line of its summary) or raised (the error, once: `said` keeps the errors
    earlier lines gave, which a later line, a stage skipped because this one raised, names as `the same error as
    <stage>`)."""
    said = said if said is not None else SpelledOnce()
    if nb.reason is not None:
        return f"[{index}/{len(NOTEBOOKS)}] {nb.notebook:<26} skipped: {said.quoted(nb.reason)}"
    line = f"[{index}/{len(NOTEBOOKS)}] {nb.notebook:<26} {nb.status:<9} {nb.seconds:6.1f}s"
    error = nb.error.splitlines()[0] if nb.error else None
    if record is not None and record.status == "error":  # what a later stage's reason quotes (`unmet`)
        given = said.error(record.stage, first_line(record.summary))
        error = error or given
    elif record is not None and record.status == "fail":
        error = error or first_line(record.summary)
    return line + (f"\n      {error}" if error else "")


def _notebook(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.is_file():
        raise NeuronkitInputError(f"notebook {path} not found (is {folder} the workbook's notebooks folder?)")
    return path


def _absolute(value: str | os.PathLike) -> str:
    """A path that exists from here made absolute; anything else (a bundled model name) as it is."""
    path = Path(value).expanduser()
    return str(path.resolve()) if path.exists() else str(value)


@contextmanager
def _kernel_environment() -> Iterator[None]:
    """Set KERNEL_ENV defaults for the kernels papermill starts, restoring the environment afterwards."""
    added = [key for key in KERNEL_ENV if key not in os.environ]
    os.environ.update({key: KERNEL_ENV[key] for key in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)
