"""Notebooks 00-06 run by hand alone or out of order (issue 34.6): each completes, or stops at its first cell
after the parameters with one line naming the record it lacks and the command that makes it, never a
traceback through neuronkit's code; the report notebook renders whatever records exist.

Cheap by construction (papermill on conftest's forked kernels, tiny-qwen3): one run of the seven in a seeded
shuffle whose seed puts 00 after 01-05 and 06 last, in one fresh run directory. Every notebook before 00 finds
that directory empty, as when run alone, so it stops at its first cell (none of the heavy stages runs); 00 then
starts the run and 06 renders a partial report from its one record. The report notebook alone, in a directory
that does not exist, is the one more execution."""

from __future__ import annotations

import os
import random
from pathlib import Path

import nbformat
import papermill
import pytest
from papermill.exceptions import PapermillExecutionError

from neuronkit.kernels.starter import KERNEL_NAME, shutdown
from neuronkit.pipeline.record import RunDir
from neuronkit.pipeline.stage import STAGE, WORKBOOK
from neuronkit.resources import notebooks_dir
from neuronkit.errors import NeuronkitInputError
from neuronkit.pipeline.config import default_run_dir
from neuronkit.workbook import NOTEBOOKS, parameters
from neuronkit.workbook.params import validate, weightless

NOTEBOOKS_DIR = notebooks_dir()
# random.Random(SEED).shuffle of 00..06: 00 after 01-05 and 06 last (asserted below), so nothing heavy runs
SEED = 86
BY_NUMBER = {name[:2]: name for name in NOTEBOOKS}
COMMAND = "`neuronkit run tiny-qwen3 --out "


def _execute(name: str, run_dir: Path, kernels, folder: Path) -> tuple[Path, PapermillExecutionError | None]:
    """Execute notebook `name` on tiny-qwen3 into `folder` with `run_dir`; its output and the error it stopped on."""
    output = folder / name
    km = kernels.km(NOTEBOOKS_DIR)
    error = None
    try:
        papermill.execute_notebook(str(NOTEBOOKS_DIR / name), str(output),
                                   parameters={"model": "tiny-qwen3", "run_dir": str(run_dir)},
                                   kernel_name=KERNEL_NAME, cwd=str(NOTEBOOKS_DIR), progress_bar=False,
                                   execution_timeout=120, km=km)
    except PapermillExecutionError as exc:
        error = exc
    finally:
        shutdown(km)
    return output, error


def _outputs(notebook: Path) -> list[tuple[int, dict]]:
    """(code cell index, output) of every output of an executed notebook."""
    code = [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]
    return [(index, output) for index, cell in enumerate(code) for output in cell.outputs]


def _assert_no_traceback(notebook: Path) -> None:
    """No output shows a traceback: no error but one-line ones, no printed `Traceback (most recent call last)`."""
    outputs = [output for _, output in _outputs(notebook)]
    assert all(len(o.traceback) == 1 for o in outputs if o.output_type == "error"), outputs
    assert not [o for o in outputs if "Traceback (most recent call last)" in str(o)], outputs


def _assert_stopped_at_first_cell(notebook: Path, error: PapermillExecutionError, needs: str,
                                  run_dir: Path) -> None:
    """The notebook stopped in the cell right after the (injected) parameters, on one line that names notebook
    `needs`'s missing record and a command making it."""
    code = [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]
    injected = next(i for i, c in enumerate(code) if "injected-parameters" in c.metadata.get("tags", []))
    failed = [(i, o) for i, o in _outputs(notebook) if o.output_type == "error"]
    assert [i for i, _ in failed] == [injected + 1], "it must stop in the first cell after the parameters"
    (line,) = failed[0][1].traceback  # one line, no traceback
    assert error.ename == "NeuronkitMissingStage" and line == error.evalue
    number = notebook.name[:2]
    assert line.startswith(f"notebook {number} needs notebook {STAGE[needs].number}'s {STAGE[needs].title} "
                           f"record in {run_dir}: run {STAGE[needs].ipynb} first, or {COMMAND}{run_dir.resolve()}`")
    _assert_no_traceback(notebook)


@pytest.mark.notebooks
def test_notebooks_in_a_shuffled_order_stop_in_one_line_or_complete_and_06_reports(tmp_path: Path,
                                                                                   forked_kernels) -> None:
    order = [name[:2] for name in NOTEBOOKS]
    random.Random(SEED).shuffle(order)
    assert order[-2:] == ["00", "06"] and sorted(order[:-2]) == ["01", "02", "03", "04", "05"], order
    run_dir = tmp_path / "run"
    for number in order:
        before = sorted(p.name for p in run_dir.iterdir()) if run_dir.exists() else []
        notebook, error = _execute(BY_NUMBER[number], run_dir, forked_kernels, tmp_path)
        if number in ("00", "06"):
            assert error is None, error
            _assert_no_traceback(notebook)
            continue
        assert before == [], "a notebook before 00 runs as it would alone, in an empty run directory"
        assert error is not None, f"{number} ran without the records it needs"
        stage = next(s for s in WORKBOOK if s.number == number)
        _assert_stopped_at_first_cell(notebook, error, stage.requires[0], run_dir)
        assert not run_dir.exists() or not any(run_dir.iterdir()), f"{number} wrote into the run directory"
    run = RunDir(run_dir)
    assert run.read("environment").status in ("pass", "warn")
    assert [stage for stage, record in run.results().items() if record is not None] == ["environment"]
    assert (run_dir / "report.html").stat().st_size > 0 and (run_dir / "report.json").is_file()


@pytest.mark.notebooks
def test_report_notebook_alone_stops_in_one_line(tmp_path: Path, forked_kernels) -> None:
    """With no record at all there is nothing to report: 06 names notebook 00 and the command."""
    run_dir = tmp_path / "never-run"
    notebook, error = _execute(BY_NUMBER["06"], run_dir, forked_kernels, tmp_path)
    assert error is not None and error.ename == "NeuronkitMissingStage"
    assert error.evalue == (f"notebook 06 needs the stage records of notebooks 00-05 in {run_dir}, and there are "
                            f"none: run 00_environment.ipynb first, or {COMMAND}{run_dir.resolve()}`")
    _assert_no_traceback(notebook)
    assert not run_dir.exists()


def test_a_weightless_checkpoint_is_refused_in_the_clis_sentence_unless_random_weights(tmp_path: Path) -> None:
    """The bundled qwen3-100m is a config alone: a notebook's parameters refuse it, before anything is saved, in
    the sentence `neuronkit run` gives (its validation is the same `validate`; its preflight says `weightless`)."""
    sentence = ("qwen3-100m has no weights (*.safetensors or pytorch_model*.bin): the workbook runs a checkpoint's "
                "own weights; pass --random-weights (random_weights=True) to run it on random ones")
    assert weightless("qwen3-100m") == sentence
    with pytest.raises(NeuronkitInputError) as notebook:
        parameters(model="qwen3-100m", run_dir=str(tmp_path / "nb"))
    with pytest.raises(NeuronkitInputError) as cli:
        validate("qwen3-100m", str(tmp_path / "cli"))
    assert str(notebook.value) == str(cli.value) == f"bad workbook parameters: {sentence}"
    assert validate("qwen3-100m", str(tmp_path / "cli"), random_weights=True).model == "qwen3-100m"
    assert not (tmp_path / "nb").exists() and not (tmp_path / "cli").exists()


def test_run_dir_left_empty_is_the_models_own(tmp_path: Path) -> None:
    """run_dir "" is runs/<model name> at the repository root (the notebooks run in notebooks/), the directory
    `neuronkit run MODEL` fills when started there."""
    assert parameters(model="tiny-qwen3").run_dir == str(Path("..") / "runs" / "tiny-qwen3")
    assert default_run_dir(str(tmp_path / "ckpt" / "config.json")) == Path("runs") / "ckpt"


def test_a_notebook_waits_for_a_running_workbook_but_not_for_a_killed_one(tmp_path: Path) -> None:
    """`neuronkit run` lists the stages it will write in its UNDERWAY record: a notebook started beside it goes
    on without their records, but once that run is gone (hard-killed, the record left behind), the notebook
    stops in one line as when run alone instead of waiting for stages nobody runs."""
    import subprocess
    import sys

    from neuronkit.errors import NeuronkitMissingStage
    from neuronkit.workbook.params import UNDERWAY, prerequisites

    params = parameters(model="tiny-qwen3", run_dir=str(tmp_path / "run"))
    stages = [stage.name for stage in WORKBOOK]
    params.run.write_side_record(UNDERWAY, {"stages": stages, "pid": os.getpid()})
    prerequisites(params, "compile")  # its cells start beside eager's: the records come from the running workbook
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    params.run.write_side_record(UNDERWAY, {"stages": stages, "pid": int(gone.stdout)})
    with pytest.raises(NeuronkitMissingStage) as stopped:
        prerequisites(params, "compile")
    first = STAGE[STAGE["compile"].requires[0]]
    assert str(stopped.value).startswith(f"notebook {STAGE['compile'].number} needs notebook {first.number}'s "
                                         f"{first.title} record in {params.run_dir}: run {first.ipynb} first")
