"""The workbook's parameters: the values a team sets in a notebook's `parameters` cell, validated once.

Every notebook passes its parameters cell through `parameters()` in the cell right after it, so a
missing checkpoint, a wrong type or an unknown dtype stops the run at the top of the notebook with one
message listing every problem, before a model is loaded.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from neuronkit.errors import DTYPES, NeuronkitInputError, NeuronkitMissingStage, positive_int_problem
from neuronkit.pipeline.config import DEFAULTS, Params, RunConfig, default_run_dir, model_name
from neuronkit.pipeline.flow import check_same_run
from neuronkit.pipeline.record import RunDir, unmet
from neuronkit.pipeline.stage import REPORT_NOTEBOOK, STAGE, WORKBOOK
from neuronkit.run_command import run_command

__all__ = ["DTYPES", "Params", "UNDERWAY", "check_declared_types", "on_random_weights", "parameters",
           "positive_int_problem", "prerequisites", "report_dir", "run_directory", "validate"]

# Where a notebook's `run_dir = ""` puts the run, relative to the notebooks folder the kernel runs in: the
# repository root's `runs/<model name>`, the directory `neuronkit run MODEL` fills when started there.
NOTEBOOKS_ROOT = ".."
# The folder of the run directory the random-weights checkpoint is saved into (`on_random_weights`).
RANDOM_WEIGHTS_FOLDER = "random-weights"
# The side record `neuronkit run` keeps in the run directory while it runs: the stages whose records it will
# write, and its process id: a run killed before it could remove the record leaves it behind, and a notebook
# run by hand afterwards must not wait for that run's stages (`prerequisites`).
UNDERWAY = "underway.json"


def parameters(model: Any, run_dir: Any = "", dtype: Any = DEFAULTS.dtype, seq_len: Any = DEFAULTS.seq_len,
               batch_size: Any = DEFAULTS.batch_size, layers: Any = DEFAULTS.layers,
               full_model: Any = DEFAULTS.full_model, random_weights: Any = False) -> Params:
    """Validate a notebook's parameters; raise one NeuronkitInputError naming every bad one.

    `run_dir` "" is the model's own, `runs/<model name>` at the repository root (`NOTEBOOKS_ROOT`). A checkpoint
    without weights is refused unless `random_weights`, which runs the model its config describes on random
    weights: the returned parameters name the random checkpoint saved in the run directory (`on_random_weights`),
    saved by the first notebook that needs it (by `neuronkit run --random-weights` before any notebook)."""
    params = validate(model, run_dir, dtype, seq_len, batch_size, layers, full_model, random_weights)
    return on_random_weights(params) if random_weights else params


def validate(model: Any, run_dir: Any = "", dtype: Any = DEFAULTS.dtype, seq_len: Any = DEFAULTS.seq_len,
             batch_size: Any = DEFAULTS.batch_size, layers: Any = DEFAULTS.layers,
             full_model: Any = DEFAULTS.full_model, random_weights: Any = False) -> Params:
    """`parameters` without saving the random-weights checkpoint: the checks alone (the runner's, before it
    clears the run directory)."""
    problems: list[str] = []
    if not isinstance(model, (str, os.PathLike)) or not str(model).strip():
        problems.append(f"model must be a bundled model name or a checkpoint directory (a string), "
                        f"got {_shown(model)}")
    if not isinstance(run_dir, (str, os.PathLike)):
        problems.append(f"run_dir must be a directory path (a string), got {_shown(run_dir)}")
    elif not problems:
        run_dir = run_directory(str(model), run_dir)
    if not isinstance(random_weights, bool):
        problems.append(f"random_weights must be True or False, got {_shown(random_weights)}")
    if not isinstance(dtype, str) or dtype.removeprefix("torch.") not in DTYPES:
        problems.append(f"dtype must be one of {', '.join(DTYPES)} (the dtypes the neuron device computes in), "
                        f"got {_shown(dtype)}")
    problems += [p for name, value in (("seq_len", seq_len), ("batch_size", batch_size))
                 if (p := positive_int_problem(name, value))]
    if layers != 0 and positive_int_problem("layers", layers):
        problems.append(f"layers must be 0 (as many blocks as fit) or a positive number of blocks, got {_shown(layers)}")
    if not isinstance(full_model, bool):
        problems.append(f"full_model must be True or False, got {_shown(full_model)}")
    elif full_model and layers not in (0, None):
        problems.append("choose layers or full_model, not both")
    if not problems:
        problems += _model_problems(str(model), seq_len, random_weights)
    if len(problems) == 1:
        raise NeuronkitInputError(f"bad workbook parameters: {problems[0]}")
    if problems:
        raise NeuronkitInputError("bad workbook parameters:\n" + "\n".join(f"  - {p}" for p in problems))
    return Params(str(model), str(run_dir), RunConfig(dtype=dtype.removeprefix("torch."), seq_len=seq_len,
                                                      batch_size=batch_size, layers=layers, full_model=full_model))


def prerequisites(params: Params, stage: str) -> None:
    """Stop a stage's notebook at its first cell when the run lacks what it needs: a run started with other
    parameters, or a pass/warn record of each stage it requires (neuronkit/data/stages.toml's `requires`). One
    NeuronkitMissingStage says what is missing and the command that makes it: `notebook 02 needs notebook 01's
    CPU baseline record in ../runs/tiny-qwen3: run 01_cpu_baseline.ipynb first, or `neuronkit run tiny-qwen3``.

    Under `neuronkit run` (its UNDERWAY side record), a required stage its notebook need not wait for
    (`starts_after`: the compile notebook's own cells start beside eager's) is the stage cell's to wait for:
    `neuronkit.pipeline.flow.begin` records `skipped` there if it did not pass."""
    check_same_run(params)
    run, this = params.run, STAGE[stage]
    underway = _underway(run)
    for needed in this.requires:  # the migration order: the earliest cause first
        if needed not in this.starts_after and needed in underway:
            continue
        record, source = run.read(needed), STAGE[needed]
        if record is not None and record.ok:
            continue
        what = f"notebook {this.number} needs notebook {source.number}'s {source.title} record in {params.run_dir}"
        if record is None:
            todo = f"run {source.ipynb} first"
        else:
            what += f", and {unmet(needed, record)}"
            todo = f"fix that and run {source.ipynb} again"
        raise NeuronkitMissingStage(f"{what}: {todo}, or `{_run_command(params)}`")


def _underway(run: RunDir) -> set[str]:
    """The stages a `neuronkit run` still running in this run directory will write; none when its process is
    gone (it was killed before it could remove its UNDERWAY record)."""
    record = run.read_side_record(UNDERWAY) or {}
    if isinstance(record.get("pid"), int) and record["pid"] > 0:
        try:
            os.kill(record["pid"], 0)
        except ProcessLookupError:
            return set()
        except PermissionError:
            pass  # alive, under another user
    return set(record.get("stages", ()))


def report_dir(model: str, run_dir: str | os.PathLike[str] = "") -> str:
    """The run directory the report notebook renders (`run_directory`), once it holds a stage record: the report
    shows whatever records exist, a stage not run yet as missing. Without any, one NeuronkitMissingStage names
    the notebook that starts the run and the command that makes every record."""
    path = run_directory(model, run_dir)
    if not any(record is not None for record in RunDir(path).results().values()):
        first = WORKBOOK[0]
        raise NeuronkitMissingStage(f"notebook {REPORT_NOTEBOOK[:2]} needs the stage records of notebooks "
                                    f"{first.number}-{WORKBOOK[-1].number} in {path}, and there are none: run "
                                    f"{first.ipynb} first, or `{_run_command(Params(model, path))}`")
    return path


def _run_command(params: Params) -> str:
    """The `neuronkit run` command that makes this run's records: `--out` unless the run directory is the model's
    own (the command started at the repository root), options that differ from the defaults."""
    path = Path(params.run_dir)
    default = path.resolve() == default_run_dir(params.model, NOTEBOOKS_ROOT).resolve()
    options = {k: v for k, v in params.config.shared().items() if v != getattr(DEFAULTS, k)}
    command = run_command(params.model, None if default else str(path.resolve()), options)
    return command + (" --overwrite" if path.is_dir() and any(path.iterdir()) else "")


def check_declared_types(values: dict[str, Any], declared: dict[str, str]) -> None:
    """Refuse notebook parameters that do not fit the type their parameters cell declares
    (`max_new_tokens: int = 16`): every `int` of the workbook is a positive count, a `bool` a switch and a
    `str` text. Checked before any kernel starts, so a bad `-p` value is bad input, not a failed notebook."""
    problems = []
    for name, value in values.items():
        kind = declared.get(name)
        if kind == "int":
            problems.append(positive_int_problem(name, value))
        elif kind == "bool" and not isinstance(value, bool):
            problems.append(f"{name} must be true or false, got {_shown(value)}")
        elif kind == "str" and not isinstance(value, str):
            problems.append(f"{name} must be text, got {_shown(value)}")
    problems = [p for p in problems if p]
    if problems:
        raise NeuronkitInputError(f"bad workbook parameters: {'; '.join(problems)}")


def run_directory(model: str, run_dir: str | os.PathLike[str] = "") -> str:
    """A notebook's run directory: `run_dir`, or for "" the model's own, `runs/<model name>` at the repository
    root (`NOTEBOOKS_ROOT`, from the notebooks folder), where `neuronkit run MODEL` started there writes."""
    return str(run_dir) if str(run_dir).strip() else str(default_run_dir(model, NOTEBOOKS_ROOT))


def on_random_weights(params: Params) -> Params:
    """The run on random weights: `params` naming the checkpoint of its model's config with random weights,
    `random-weights/<model name>` in the run directory, saved there first unless it already is (the runner
    saves it before any kernel starts; by hand, the first notebook run on it). Given that checkpoint itself,
    the same."""
    from neuronkit.models import has_weights, save_random_checkpoint

    target = Path(params.run_dir) / RANDOM_WEIGHTS_FOLDER / model_name(params.model)
    if not (target.is_dir() and has_weights(target)):
        save_random_checkpoint(params.model, target, params.config.dtype)
    return dataclasses.replace(params, model=str(target.resolve()))


def weightless(model: str) -> str:
    """The one sentence refusing a checkpoint without weights, the CLI's and a notebook's alike."""
    return (f"{model} has no weights (*.safetensors or pytorch_model*.bin): the workbook runs a checkpoint's own "
            "weights; pass --random-weights (random_weights=True) to run it on random ones")


def _model_problems(model: str, seq_len: int, random_weights: bool = False) -> list[str]:
    """The checkpoint exists, has a config transformers knows, has weights (unless `random_weights`), and accepts
    `seq_len` tokens."""
    # deferred: transformers loads only when a model is named
    from neuronkit.models import has_weights, load_config, max_positions, too_long

    try:
        config = load_config(model)
    except NeuronkitInputError as exc:
        return [str(exc)]  # it names the model or its file
    if problem := too_long(max_positions(config), seq_len):
        return [problem]
    if not random_weights and not has_weights(model):
        return [weightless(model)]
    return []


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"
