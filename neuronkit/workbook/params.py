"""The workbook's parameters: the values a team sets in a notebook's `parameters` cell, validated once.

Every notebook passes its parameters cell through `parameters()` in the cell right after it, so a
missing checkpoint, a wrong type or an unknown dtype stops the run at the top of the notebook with one
message listing every problem, before a model is loaded.
"""

from __future__ import annotations

import os
from typing import Any

from neuronkit.errors import DTYPES, NeuronkitInputError, positive_int_problem, require_positive_ints
from neuronkit.pipeline.config import DEFAULTS, Params, RunConfig

__all__ = ["DTYPES", "Params", "check_declared_types", "parameters", "positive_int_problem", "require_positive_ints"]


def parameters(model: Any, run_dir: Any, dtype: Any = DEFAULTS.dtype, seq_len: Any = DEFAULTS.seq_len,
               batch_size: Any = DEFAULTS.batch_size, layers: Any = DEFAULTS.layers,
               full_model: Any = DEFAULTS.full_model) -> Params:
    """Validate a notebook's parameters; raise one NeuronkitInputError naming every bad one."""
    problems: list[str] = []
    if not isinstance(model, (str, os.PathLike)) or not str(model).strip():
        problems.append(f"model must be a bundled model name or a checkpoint directory (a string), "
                        f"got {_shown(model)}")
    if not isinstance(run_dir, (str, os.PathLike)) or not str(run_dir).strip():
        problems.append(f"run_dir must be a directory path (a string), got {_shown(run_dir)}")
    if not isinstance(dtype, str) or dtype.removeprefix("torch.") not in DTYPES:
        problems.append(f"dtype must be one of {', '.join(DTYPES)} (the dtypes the neuron device computes in), "
                        f"got {_shown(dtype)}")
    for name, value in (("seq_len", seq_len), ("batch_size", batch_size)):
        problem = positive_int_problem(name, value)
        if problem:
            problems.append(problem)
    if layers != 0 and positive_int_problem("layers", layers):
        problems.append(f"layers must be 0 (as many blocks as fit) or a positive number of blocks, got {_shown(layers)}")
    if not isinstance(full_model, bool):
        problems.append(f"full_model must be True or False, got {_shown(full_model)}")
    elif full_model and layers not in (0, None):
        problems.append("choose layers or full_model, not both")
    if not problems:
        problems += _model_problems(str(model), seq_len)
    if len(problems) == 1:
        raise NeuronkitInputError(f"bad workbook parameters: {problems[0]}")
    if problems:
        raise NeuronkitInputError("bad workbook parameters:\n" + "\n".join(f"  - {p}" for p in problems))
    return Params(str(model), str(run_dir), RunConfig(dtype=dtype.removeprefix("torch."), seq_len=seq_len,
                                                      batch_size=batch_size, layers=layers, full_model=full_model))


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


def _model_problems(model: str, seq_len: int) -> list[str]:
    """The checkpoint exists, has a config transformers knows, and accepts `seq_len` tokens."""
    from neuronkit.models import load_config  # deferred: transformers loads only when a model is named

    try:
        config = load_config(model)
    except NeuronkitInputError as exc:
        return [f"model: {exc}"]
    limit = getattr(config.get_text_config(), "max_position_embeddings", None)
    if isinstance(limit, int) and seq_len > limit:
        return [f"seq_len {seq_len} exceeds the model's max_position_embeddings {limit}"]
    return []


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"
