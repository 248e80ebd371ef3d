"""The workbook: clean committed notebooks, parameter validation, and (marked `notebooks`) the whole
sequence executed by papermill on the bundled tiny-qwen3 (with nbval's checks of its notebooks), failure
handling, and other architectures through the stage functions with the notebooks whose cells branch on the
task executed."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import nbformat
import papermill
import pytest
from papermill.exceptions import PapermillExecutionError

from conftest import executed_notebooks, unrendered_plots
from neuronkit.errors import NeuronkitInputError
from neuronkit.resources import data_dir, notebooks_dir
from neuronkit.pipeline.record import STAGES, RunDir
from neuronkit.workbook import NOTEBOOKS, Execution, parameters, run_workbook
from neuronkit.kernels.starter import KERNEL_NAME, shutdown

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = notebooks_dir()
CELL_TIMEOUT = 600


# --- committed notebooks and parameters (fast) -------------------------------------------------------

def _cells(nb: nbformat.NotebookNode) -> list[tuple[str, str, list[str]]]:
    return [(c.cell_type, c.source, c.metadata.get("tags", [])) for c in nb.cells]


SOURCES = ROOT / "notebooks"


def test_every_notebook_has_its_percent_source_and_back() -> None:
    assert sorted(p.stem for p in SOURCES.glob("*.ipynb")) == sorted(p.stem for p in SOURCES.glob("[0-9]*.py"))
    assert set(NOTEBOOKS) <= {p.name for p in SOURCES.glob("*.ipynb")}


@pytest.mark.parametrize("name", sorted(p.name for p in SOURCES.glob("*.ipynb")))
def test_notebook_is_in_sync_with_its_percent_source(name: str) -> None:
    """Each .ipynb is paired with notebooks/NN_name.py (jupytext percent format): same cells, same tags."""
    import jupytext

    source = SOURCES / name.replace(".ipynb", ".py")
    nb = nbformat.read(SOURCES / name, as_version=4)
    assert nb.metadata.jupytext.formats == "ipynb,py:percent"
    assert _cells(nb) == _cells(jupytext.read(source)), \
        f"{name} and {source.name} differ: run jupytext --sync notebooks/{source.name} (the newer file wins)"
    ids = [c.id for c in nb.cells]
    assert len(set(ids)) == len(ids), "cell ids must be unique (nbval's expected outputs are keyed by them)"


def test_code_and_notebook_sources_pass_ruff() -> None:
    """ruff (configured in pyproject.toml) over the package, tests, benches and notebook sources."""
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_clean_and_parameterized(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith(f"# {name[:2]} ·")
    assert code[0].metadata.get("tags") == ["parameters"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert 'os.environ.setdefault("HF_HUB_OFFLINE", "1")' in code[0].source
    assert nb.metadata.kernelspec.name == KERNEL_NAME
    check = code[-1]  # nbval's checked cell: tagged for nbval, hidden and removable in the learner's view
    assert {"nbval-check-output", "remove-cell"} <= set(check.metadata.get("tags", []))
    assert check.metadata.get("jupyter") == {"source_hidden": True} and "display.checked(" in check.source
    assert sum("nbval-check-output" in c.metadata.get("tags", []) for c in code) == 1
    # a learner reads "Try it", the recap and "Next" as text, not as comments inside a code cell
    assert not [c.source[:60] for c in code if any(f"# ## {h}" in c.source for h in ("Try it", "Recap", "Next"))]


def test_parameters_list_every_problem_at_once() -> None:
    with pytest.raises(NeuronkitInputError) as info:
        parameters(model="tiny-qwen3", run_dir=3, dtype="float64", seq_len="16", batch_size=0)
    message = str(info.value)
    assert "run_dir must be a directory path (a string), got int 3" in message
    assert "dtype must be one of float32, bfloat16, float16" in message
    assert "seq_len must be a positive integer, got str '16'" in message
    assert "batch_size must be a positive integer, got 0" in message


def test_parameters_refuse_a_missing_checkpoint_and_a_too_long_sequence(tmp_path: Path) -> None:
    with pytest.raises(NeuronkitInputError, match="not found"):
        parameters(model=str(tmp_path / "no-such-checkpoint"), run_dir=str(tmp_path))
    with pytest.raises(NeuronkitInputError, match="exceeds the model's max_position_embeddings"):
        parameters(model="tiny-qwen3", run_dir=str(tmp_path), seq_len=100_000)


def test_runner_refuses_bad_parameters_before_starting_a_kernel(tmp_path: Path) -> None:
    with pytest.raises(NeuronkitInputError, match="not found"):
        run_workbook(tmp_path / "missing", tmp_path / "run")
    with pytest.raises(NeuronkitInputError, match="unknown workbook parameter"):
        run_workbook("tiny-qwen3", tmp_path / "run", parameters={"max_new_tokenz": 4})
    with pytest.raises(NeuronkitInputError, match="kernels must be one of fork, warm, cold, got 'hot'"):
        run_workbook("tiny-qwen3", tmp_path / "run", execution=Execution(kernels="hot"))
    assert not (tmp_path / "run").exists()


def test_cli_run_exits_2_on_bad_parameters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from neuronkit.cli import main

    assert main(["run", str(tmp_path / "missing"), "--out", str(tmp_path / "run")]) == 2
    assert main(["run", "tiny-qwen3", "--out", str(tmp_path / "run"), "-p", "run_dir", "x"]) == 2
    assert "neuronkit run: error: bad workbook parameters" in capsys.readouterr().err


# --- executed notebooks ------------------------------------------------------------------------------

def _run(model: str, out: Path, notebooks: Path | None = None, cell_timeout: int = CELL_TIMEOUT,
         **kwargs) -> tuple[object, list[str]]:
    lines: list[str] = []
    execution = Execution(cell_timeout=cell_timeout, notebooks=notebooks)
    result = run_workbook(model, out, log=lines.append, execution=execution, **kwargs)
    return result, lines


def _assert_every_stage_passed(out: Path) -> None:
    """Every stage left a pass or warn record in run directory `out`, and its report is complete."""
    run = RunDir(out)
    for stage in STAGES:
        record = run.read(stage)
        assert record is not None, f"{stage} left no record"
        assert record.status in ("pass", "warn"), f"{stage}: {record.status} — {record.summary}\n{record.error}"
    assert (out / "report.html").stat().st_size > 0
    assert json.loads((out / "report.json").read_text())["missing_stages"] == []


def _assert_complete_run(out: Path, ok: bool, lines: list[str]) -> None:
    assert ok, "\n".join(lines)
    _assert_every_stage_passed(out)
    for name in NOTEBOOKS:
        assert (out / "artifacts" / "notebooks" / name).is_file()
    assert len([line for line in lines if line.startswith("[")]) == len(NOTEBOOKS)
    assert lines[-1] == f"report: {out / 'report.html'}"


NBVAL = ROOT / "tests" / "nbval"
NBVAL_TAG = "nbval-check-output"


def _as_nbval_compares(outputs: list, patterns: list[tuple[str, str]]) -> list[object]:
    """A checked cell's outputs as `pytest --nbval-lax` compares them (nbval's own stream handling): streams
    coalesced and keyed by name, data by MIME type without images, every text through the sanitizers."""
    from nbval.plugin import coalesce_streams, transform_streams_for_comparison

    def clean(text: object) -> object:
        for regex, replace in patterns:
            text = re.sub(regex, replace, text) if isinstance(text, str) else text
        return text

    compared = []
    for output in transform_streams_for_comparison(coalesce_streams([nbformat.from_dict(o) for o in outputs])):
        data = output.get("data", {k: v for k, v in output.items() if k != "output_type"})
        compared.append({key: clean(value) for key, value in data.items() if key not in ("image/png", "metadata")})
    return compared


def assert_checked_cells_match_their_recorded_outputs(executed: Path, names: list[str] = NOTEBOOKS) -> None:
    """nbval's check of the workbook, on notebooks already executed (`names`, all by default): each notebook's
    `nbval-check-output` cell printed what tests/nbval/expected_outputs.json recorded for that cell's code,
    after the sanitizers of tests/nbval/sanitize.cfg (dates, durations, paths, addresses)."""
    from nbval.plugin import get_sanitize_patterns

    expected = json.loads((NBVAL / "expected_outputs.json").read_text(encoding="utf-8"))
    patterns = get_sanitize_patterns((NBVAL / "sanitize.cfg").read_text(encoding="utf-8"))
    seen = []
    for name in names:
        for cell in nbformat.read(executed / name, as_version=4).cells:
            if cell.cell_type != "code" or NBVAL_TAG not in cell.metadata.get("tags", []):
                continue
            key = f"{name}#{cell.id}"
            seen.append(key)
            assert key in expected and expected[key]["source"] == cell.source, \
                f"{key}: no output recorded for this cell's code: python tests/nbval/prepare.py OUT --record, review"
            assert _as_nbval_compares(cell.outputs, patterns) == _as_nbval_compares(expected[key]["outputs"], patterns), \
                f"{key} printed {[o.get('text') for o in cell.outputs]}, recorded {expected[key]['outputs']}"
    assert sorted(seen) == sorted(key for key in expected if key.partition("#")[0] in names), \
        "every recorded cell is checked, one per notebook"


# Left out of the copy the wheel is built from: environments (.venv, .venv-2.14, ...), outputs and caches (.tmp: the
# TMPDIR of test runs, this one included), not sources.
_NOT_SOURCES = shutil.ignore_patterns(".git", ".venv*", ".tmp", "runs", "build", "dist", "*.egg-info", "__pycache__",
                                      "neff_cache", ".ipynb_checkpoints")


@pytest.mark.notebooks
@pytest.mark.subprocess
def test_whole_workbook_on_tiny_qwen3_from_a_wheel_installed_outside_the_checkout(tmp_path: Path) -> None:
    """`pip install` of the wheel into a fresh venv, then `neuronkit run tiny-qwen3` from elsewhere; its
    executed notebooks are also the ones nbval's check reads (assert_checked_cells_match_their_recorded_outputs).

    The venv gets neuronkit only from the wheel. Its dependencies (torch alone is GBs) come from this
    test's own environment through a .pth line naming its site-packages, rather than being downloaded
    again: a path added that way is not a site directory, so the editable install of the checkout that
    lives there is not activated, and the wheel's neuronkit is the one imported. The wheel is built
    without build isolation (the setuptools at hand, nothing fetched) from a copy of the sources, whose
    build directory holds the native runtime this environment built (`make setup`): setup.py reuses an
    extension newer than its sources as setuptools does, so the wheel is packed without compiling the C++
    again (~150 s of CPU); were the sources newer, it would compile them.
    """
    src, dist, venv, elsewhere = (tmp_path / name for name in ("src", "dist", "venv", "elsewhere"))
    shutil.copytree(ROOT, src, symlinks=True, ignore=_NOT_SOURCES)
    native = Path(importlib.util.find_spec("neuronkit.device.simulator._native").origin)
    build_lib = src / "build" / f"lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}"
    built = build_lib / "neuronkit" / "device" / "simulator" / native.name
    built.parent.mkdir(parents=True)
    shutil.copy2(native, built)  # its own modification time: older than an edited source, it is rebuilt
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", str(dist), str(src)], check=True, capture_output=True, timeout=600)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = dist.glob("neuronkit-*.whl")
    # `import nki` before torch: the start-up hook and the module it imports sit at site-packages' root
    assert {"neuronkit-nki.pth", "_neuronkit_nki.py"} <= set(zipfile.ZipFile(wheel).namelist())
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True, timeout=120)
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "jupyter")  # no user-level kernelspec naming another Python
    located = subprocess.run([python, "-c", "import neuronkit; print(neuronkit.__file__)"], cwd=elsewhere,
                             env=env, check=True, capture_output=True, text=True).stdout.strip()
    assert located.startswith(site), f"imported {located}, not the installed wheel"

    out = tmp_path / "run"
    proc = subprocess.run([venv / "bin" / "neuronkit", "run", "tiny-qwen3", "--out", str(out)], cwd=elsewhere,
                          env=env, capture_output=True, text=True, timeout=CELL_TIMEOUT)
    lines = [line for line in proc.stdout.splitlines() if not line.startswith("installed Jupyter kernel")]
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert lines[-1].startswith("verdict: ready"), lines[-1]  # the CLI ends with the report's verdict,
    assert lines[-2] == "Every stage ran on the full model."  # after what the stages ran on
    _assert_complete_run(out, True, lines[:-2])
    executed = nbformat.read(out / "artifacts" / "notebooks" / NOTEBOOKS[0], as_version=4)
    assert executed.metadata.papermill.input_path.startswith(site), "the notebooks come from the package"
    profiled = nbformat.read(out / "artifacts" / "notebooks" / "05_profiling.ipynb", as_version=4)
    assert "profiler_start" not in json.dumps([cell.get("outputs", []) for cell in profiled.cells]), \
        "kineto's trace markers reached notebook 05's output"
    assert RunDir(out).read("cpu_baseline").evidence.generate.new_tokens > 0
    # Under the default (forked) kernels every plot of every executed notebook is a PNG; 00-06 each plot.
    plots = {path.name: unrendered_plots(path) for path in executed_notebooks(out / "artifacts" / "notebooks")}
    assert set(plots) == set(NOTEBOOKS) and not any(missing for _, missing in plots.values()), plots
    assert all(plots[name][0] >= 1 for name in NOTEBOOKS if name < "07"), plots
    assert RunDir(out).read_params() == {"model": "tiny-qwen3", "dtype": "float32", "seq_len": 16, "batch_size": 1,
                                         "layers": 0, "full_model": False}
    # nbval's checked cells, on this run's notebooks: the parameters nbval's prepared copies get (the defaults)
    assert_checked_cells_match_their_recorded_outputs(out / "artifacts" / "notebooks")


def _execute_stage_notebook(name: str, params, kernels, folder: Path) -> Path:
    """Execute workbook notebook `name` on the run `params` describe (its parameters cell gets them, as
    `neuronkit run` passes them) on a kernel of `kernels` (conftest's `forked_kernels`), into `folder`, where
    conftest's check finds its plots; return the executed notebook."""
    output = folder / name
    km = kernels.km(NOTEBOOKS_DIR)
    try:
        papermill.execute_notebook(str(NOTEBOOKS_DIR / name), str(output),
                                   parameters={**params.to_dict(), "run_dir": params.run_dir},
                                   kernel_name=KERNEL_NAME, cwd=str(NOTEBOOKS_DIR), progress_bar=False,
                                   execution_timeout=CELL_TIMEOUT, km=km)
    finally:
        shutdown(km)
    return output


def _shown(notebook: Path) -> str:
    """Everything an executed notebook's code cells printed or displayed as text or HTML."""
    outputs = [o for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code" for o in c.outputs]
    return "\n".join([o.get("text", "") for o in outputs] + [o.get("data", {}).get(mime, "") for o in outputs
                                                             for mime in ("text/plain", "text/html")])


@pytest.mark.notebooks
def test_tiny_bert_passes_every_stage_and_notebook_01_fills_its_mask(tmp_path: Path, forked_kernels) -> None:
    """The bundled masked LM (no generation: a [MASK] fill instead) through every stage of the workbook,
    each by its stage function in this process (what its notebook records), except notebook 01, executed:
    its cells branch on the task (the fill-mask sample; token labels on the plot). The stage notebooks'
    other cells take the branches tiny-qwen3's whole-workbook run (the wheel test) takes: inputs with labels,
    a tokenizer's bucket advice."""
    from neuronkit.reporting import report
    from neuronkit.stages.audit import run as audit
    from neuronkit.stages.compile import run as torch_compile
    from neuronkit.stages.eager import run as eager
    from neuronkit.stages.environment import run as environment
    from neuronkit.stages.profile import run as profile

    out = tmp_path / "bert"
    params = parameters(model=str(data_dir() / "models" / "tiny-bert"), run_dir=str(out))
    assert environment.run(params).evidence.model.architecture == "BertForMaskedLM"
    shown = _shown(_execute_stage_notebook("01_cpu_baseline.ipynb", params, forked_kernels, tmp_path))
    assert "[MASK] guesses" in shown and "greedy text" not in shown
    assert len(params.run.read("cpu_baseline").evidence.fill_mask.predictions) == 5
    eager.run(params)
    audit.run(params)
    torch_compile.run(params, timing_runs=1)
    profile.run(params, steps=1)
    report(out)
    _assert_every_stage_passed(out)


def _execute_first_notebook(tmp_path: Path, kernels, **params) -> PapermillExecutionError:
    output = tmp_path / "00.ipynb"
    km = kernels.km(NOTEBOOKS_DIR)
    with pytest.raises(PapermillExecutionError) as info:
        try:
            papermill.execute_notebook(str(NOTEBOOKS_DIR / "00_environment.ipynb"), str(output),
                                       parameters={"run_dir": str(tmp_path / "run"), **params},
                                       kernel_name=KERNEL_NAME, cwd=str(NOTEBOOKS_DIR), progress_bar=False,
                                       execution_timeout=CELL_TIMEOUT, km=km)
        finally:
            shutdown(km)
    nb = nbformat.read(output, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    failed = [c for c in code if any(o.output_type == "error" for o in c.outputs)]
    injected = next(i for i, c in enumerate(code) if "injected-parameters" in c.metadata.get("tags", []))
    assert failed == [code[injected + 1]], "the cell right after the parameters must be the one failing"
    assert not (tmp_path / "run" / "stages").exists()
    return info.value


@pytest.mark.notebooks
def test_missing_model_path_fails_in_the_first_cell(tmp_path: Path, forked_kernels) -> None:
    error = _execute_first_notebook(tmp_path, forked_kernels, model=str(tmp_path / "no-such-checkpoint"))
    assert error.ename == "NeuronkitInputError"
    assert "bad workbook parameters" in error.evalue and "not found" in error.evalue


@pytest.mark.notebooks
def test_wrong_parameter_type_fails_in_the_first_cell(tmp_path: Path, forked_kernels) -> None:
    error = _execute_first_notebook(tmp_path, forked_kernels, seq_len="16", dtype="float64")
    assert error.ename == "NeuronkitInputError"
    assert "seq_len must be a positive integer, got str '16'" in error.evalue
    assert "dtype must be one of float32, bfloat16, float16" in error.evalue


@pytest.mark.notebooks
def test_failure_mid_workbook_leaves_error_and_skipped_records_and_a_report(zoo: dict[str, Path],
                                                                             tmp_path: Path) -> None:
    """A vision model on random weights, run over a previous run's directory, on a core this machine does
    not have: notebooks 00 and 01 record the model (01's cells on an image classifier: class labels, no text
    sample), 02 fails, 03 audits it (it needs only the environment), the stages needing eager are skipped
    and the report renders the failed run. Then, as once the device is fixed, eager and profile through
    their stage functions in this process (the compile stage on ViT, its recompile on a second batch of
    images, is the zoo's: tests/test_zoo.py)."""
    from neuronkit.reporting import report as render
    from neuronkit.stages.eager import run as eager
    from neuronkit.stages.profile import run as profile

    out = tmp_path / "broken"
    (out / "stages").mkdir(parents=True)
    (out / "params.json").write_text("{}")
    (out / "stale.txt").write_text("a previous run's file")
    result, lines = _run(str(zoo["vit"]), out, overwrite=True, random_weights=True,
                         parameters={"device": "neuron:99"})
    assert not result.ok
    assert not (out / "stale.txt").exists()
    run = RunDir(out)
    assert run.read("environment").status == "pass"
    assert run.read("environment").evidence.model.architecture == "ViTForImageClassification"
    baseline = run.read("cpu_baseline")
    assert baseline.evidence.logits_shape == [1, 3]  # its head, not a base model's output
    assert baseline.evidence.weights.source == "random" and baseline.status == "warn"
    eager_record = run.read("eager")
    assert eager_record.status == "error" and "neuron:99" in eager_record.summary
    assert run.read("audit").status in ("pass", "warn"), "the audit needs only the environment"
    for stage in ("compile", "profile"):  # they need eager: not executed, skipped naming it
        record = run.read(stage)
        assert record.status == "skipped" and record.error.startswith(
            "eager failed (error: notebook 02_eager_on_neuron.ipynb failed: ")
    assert [(nb.notebook[:2], nb.status) for nb in result.notebooks] == [
        ("00", "pass"), ("01", "warn"), ("02", "error"), ("03", run.read("audit").status), ("04", "skipped"),
        ("05", "skipped"), ("06", "ok")]
    assert lines[4].startswith("[5/7] 04_compile.ipynb           skipped: eager failed (error: ")
    assert result.notebooks[-1].error is None, "the report notebook renders a failed run"
    report = json.loads((out / "report.json").read_text())
    assert report["stages"]["eager"]["status"] == "error" and (out / "report.html").stat().st_size > 0

    params = parameters(run_dir=str(out), **run.read_params())  # the run's own: the random-weights copy
    assert Path(params.model).is_relative_to(out / "random-weights")
    for stage in (eager, profile):
        assert stage.run(params, **({"steps": 1} if stage is profile else {})).status in ("pass", "warn")
    assert run.read("profile").evidence.distinct_ops > 0
    report = json.loads(render(out).json.read_text())
    assert report["missing_stages"] == [] and report["stages"]["compile"]["status"] == "skipped"
    assert report["verdict"] != "ready" and any("random weights" in reason for reason in report["reasons"])


@pytest.mark.notebooks
def test_a_moe_run_gives_the_refused_grouped_matmuls_remedy_once(zoo: dict[str, Path], tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`neuronkit run` on the zoo's Mixtral: the device refuses the experts' grouped matmul in eager, generate
    and train alike, and compile and profiling need eager. The remedy, a paragraph, is given once: under eager's
    progress line (eager's record names its steps' shared error once), and the skipped stages' lines say `the
    same error as eager`, as `check`'s table does."""
    from neuronkit.cli import main

    out = tmp_path / "run"
    assert main(["run", str(zoo["mixtral"]), "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    assert printed.count("TOKEN_GROUP_ALIGN_SIZE_M") == 1, printed
    lines = printed.splitlines()
    eager = lines.index(next(line for line in lines if line.startswith("[3/7] 02_eager_on_neuron.ipynb   error")))
    assert "TOKEN_GROUP_ALIGN_SIZE_M" in lines[eager + 1] and "generate: the same error as eager" in lines[eager + 1]
    for line in ("[5/7] 04_compile.ipynb           skipped: eager failed (error: the same error as eager)",
                 "[6/7] 05_profiling.ipynb         skipped: eager failed (error: the same error as eager)"):
        assert line in lines, printed
    run = RunDir(out)
    assert run.read("eager").summary.count("TOKEN_GROUP_ALIGN_SIZE_M") == 1
    assert "TOKEN_GROUP_ALIGN_SIZE_M" in run.read("compile").summary  # the record keeps its reason whole


def _with_cell(folder: Path, name: str, source: str) -> None:
    """Put a code cell with `source` right after notebook `name`'s parameters cell."""
    path = folder / name
    nb = nbformat.read(path, as_version=4)
    after = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(after + 1, nbformat.v4.new_code_cell(source))
    nbformat.write(nb, path)


@pytest.mark.notebooks
def test_a_stalled_kernel_and_a_dead_one_end_the_run_with_clear_errors_and_a_report(tmp_path: Path) -> None:
    folder = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS_DIR, folder)
    # SIGSTOP: the kernel process lives on but never answers, as in a stall; SIGKILL: it dies.
    _with_cell(folder, "00_environment.ipynb", "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)")
    _with_cell(folder, NOTEBOOKS[-1], "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    out = tmp_path / "stalled"
    start = time.monotonic()
    result, lines = _run("tiny-qwen3", out, notebooks=folder, cell_timeout=4)
    elapsed = time.monotonic() - start
    assert not result.ok
    stalled, *skipped_runs, report_nb = result.notebooks
    assert [nb.status for nb in skipped_runs] == ["skipped"] * (len(STAGES) - 1)
    assert all(nb.reason.startswith("environment failed (error: notebook 00_environment.ipynb failed: "
                                    "CellTimeoutError") for nb in skipped_runs)
    assert stalled.error.splitlines() == [
        "CellTimeoutError: code cell 3 ('import os, signal') was still running after the 4 s cell timeout "
        "(a stalled kernel, or a cell that needs longer: raise --cell-timeout)"]
    assert report_nb.error == "DeadKernelError: the kernel died during code cell 3 ('import os, signal') " \
                              "(out of memory, or a crash)"
    assert lines[0].endswith(f"\n      {stalled.error}") and lines[-1] == f"report: {out / 'report.html'}"
    run = RunDir(out)
    assert run.read("environment").status == "error" and "CellTimeoutError" in run.read("environment").summary
    assert all(run.read(stage).status == "skipped" for stage in list(STAGES)[1:])
    assert json.loads((out / "report.json").read_text())["stages"]["environment"]["status"] == "error"
    assert elapsed < 60, f"the run took {elapsed:.0f} s: the cell timeout did not end it"


# --- architecture zoo through the stage functions (issue 11) -------------------------------------------

def test_t5_environment_and_cpu_baseline_stages_record_the_encoder_decoder(zoo: dict[str, Path], tmp_path: Path) -> None:
    """The workbook's first two stage functions (what notebooks 00 and 01 record) on T5, in this process:
    its own class, and a CPU baseline that passes. T5's other stages are the zoo's: the audit finds no
    blocker (its position bias reaches SDPA as a mask, which the device lowers natively: fidelity-audit.md
    item 1) and `check()` passes eager, generate, train and compile (tests/test_zoo.py)."""
    from neuronkit.stages.cpu_baseline import run as cpu_baseline
    from neuronkit.stages.environment import run as environment

    params = parameters(model=str(zoo["t5"]), run_dir=str(tmp_path / "t5"))
    assert environment.run(params).evidence.model.architecture == "T5ForConditionalGeneration"
    baseline = cpu_baseline.run(params, max_new_tokens=4, timing_steps=1)
    assert baseline.status == "pass", baseline.summary
    assert baseline.evidence.logits_shape[0] == 1 and baseline.evidence.loss is not None
