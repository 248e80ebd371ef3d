"""The model a stage works on, loaded the same way in every notebook: weights in the run's dtype on the
CPU, its tokenizer, and the deterministic example inputs every stage compares on."""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from neuronkit.evidence import CheckStage, ModelSlice, load as load_record
from neuronkit.stages import StageResult, worst
from neuronkit.workbook.params import Params


@dataclass
class Subject:
    """A loaded model and what the stages feed it."""

    model: Any  # transformers PreTrainedModel (the checkpoint's own class), eval mode, on the CPU
    tokenizer: Any  # PreTrainedTokenizerBase or None
    config: Any  # PretrainedConfig (a layer slice's when the model is one)
    inputs: dict[str, torch.Tensor]  # neuronkit.inputs.example_inputs: the task's inputs and labels
    kind: str  # the task: "causal_lm", "masked_lm", "seq2seq_lm", ... (neuronkit.models.TASKS)
    weights: Any  # neuronkit.models.Weights: where the weights came from, and what did not load
    model_slice: ModelSlice  # the full model, or the layer slice that fits the budget


# This kernel's loaded models, by what they are loaded from: the notebook's own cells and its stage share
# one model, tokenizer and inputs, so each checkpoint file is read once per kernel (the CPU reference and
# the device checks run the run's own model, in its dtype).
_LOADED: dict[tuple[Any, ...], Subject] = {}


def load(params: Params, dtype: str | None = None) -> Subject:
    """The run's model (the full model or the layer slice that fits, `neuronkit.slicing`), tokenizer and
    example inputs (`batch_size` × `seq_len` tokens for text), loaded once per kernel and shared.

    `dtype` overrides the run's. Cells that change the model (move it to a device, train it) work on a
    copy, or move it back."""
    from neuronkit import inputs, models

    dtype = dtype or params.dtype
    key = (params.model, dtype, params.layers, params.full_model, params.batch_size, params.seq_len)
    if key not in _LOADED:
        piece = run_slice(params)
        model, weights, _ = models.load_slice(params.model, dtype, full_model=piece.full_model,
                                              layers=None if piece.full_model else piece.layers)
        config = model.config
        tokenizer = _tokenizer(params.model)
        example = inputs.example_inputs(config, tokenizer, batch_size=params.batch_size, seq_len=params.seq_len,
                                        processor=inputs.processor_config(params.model))
        _LOADED[key] = Subject(model, tokenizer, config, example, models.task_of(config), weights, piece)
    return _LOADED[key]


def run_slice(params: Params) -> ModelSlice:
    """What the run's stages run: planned once per run directory by the first kernel that loads the model
    and read back by the others (`artifacts/model/slice.json`), so every stage runs the same blocks even
    when the memory free at its start differs."""
    from neuronkit import models, slicing

    file = params.run.artifact_dir("model") / "slice.json"
    request = {"model": params.model, "layers": params.layers, "full_model": params.full_model,
               "dtype": params.dtype}
    if file.is_file():
        stored = json.loads(file.read_text(encoding="utf-8"))
        if stored.get("request") == request:
            return load_record(ModelSlice, stored["slice"])
    _, piece = slicing.plan(models.load_config(params.model), layers=params.layers or None,
                            full_model=params.full_model, dtype=models.as_dtype(params.dtype))
    file.write_text(json.dumps({"request": request, "slice": dataclasses.asdict(piece)}), encoding="utf-8")
    return piece


@functools.lru_cache(maxsize=4)
def _tokenizer(model: str) -> Any:
    from neuronkit import models

    return models.load_tokenizer(model)


def neuron_device(device: str) -> torch.device:
    """`device` as a torch.device, refused with a clear message unless it is an existing neuron core."""
    from neuronkit.errors import NeuronkitInputError

    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise NeuronkitInputError(f"device {device!r} is not a device name ({exc})") from None
    if resolved.type != "neuron":
        raise NeuronkitInputError(f"device must be a neuron device such as 'neuron' or 'neuron:0', got {device!r}")
    count = torch.neuron.device_count()
    if resolved.index is not None and resolved.index >= count:
        raise NeuronkitInputError(f"device {device!r} does not exist: this machine has {count} logical "
                                  f"NeuronCores (neuron:0 to neuron:{count - 1})")
    return resolved


def reference_path(params: Params) -> Path:
    """Where the CPU baseline keeps the reference outputs the device stages compare with."""
    return params.run.artifact_dir("cpu_baseline") / "reference.safetensors"


def run_check(params: Params, device: str, stages: tuple[str, ...], **settings: Any) -> Any:
    """`neuronkit check`'s `stages` on the run's model (this kernel's, in the run's dtype: the full model
    or its layer slice, whose embeddings and head take no gradient), dtype and input shape, on `device`
    (made the current core, which is what the check's "neuron" means), held to the CPU baseline's
    reference."""
    from neuronkit.checks import Reference, check

    torch.neuron.set_device(neuron_device(device).index or 0)
    subject = load(params)
    report = check(subject.model, tokenizer=subject.tokenizer, stages=stages, dtype=params.dtype,
                   batch_size=params.batch_size, seq_len=params.seq_len, model_name=params.model,
                   reference=Reference.load(reference_path(params)),
                   freeze_embeddings=not subject.model_slice.full_model, **settings)
    report.weights, report.model_slice = subject.weights, subject.model_slice
    return report


def ran_on(piece: ModelSlice | None) -> str:
    """A summary's note when a stage ran on a layer slice (nothing for the full model)."""
    return "" if piece is None or piece.full_model else f"; on {piece.describe()}"


def check_stages(stages: dict[str, StageResult]) -> list[CheckStage]:
    """The check stages a workbook stage ran, as its record lists them (status and summary, no evidence)."""
    return [CheckStage(s.stage, s.status, s.summary, s.duration_s, s.error) for s in stages.values()]


def check_verdict(report: Any, own: tuple[str, ...]) -> tuple[str, str]:
    """Status and summary of the check stages a workbook stage owns: the worst of them (the whole check's
    status when they were all skipped because a stage they compare against failed), and their summaries."""
    ran = [s for s in report.stages if s.stage in own]
    status = worst(s.status for s in ran)
    return (report.status if status == "skipped" else status), "; ".join(f"{s.stage}: {s.summary}" for s in ran)
