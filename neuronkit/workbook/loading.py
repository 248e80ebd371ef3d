"""The model a stage works on, loaded the same way in every notebook: weights in the run's dtype on the
CPU, its tokenizer, and the deterministic example inputs every stage compares on."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
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
    device_model: Any = None  # the notebook's own copy on a neuron core (`adopt`), which the device checks run


# This kernel's loaded models, by what they are loaded from: the notebook's own cells and its stage share
# one model, tokenizer and inputs, so each checkpoint file is read once per kernel (the CPU reference and
# the device checks run the run's own model, in its dtype). A model the notebook's cells loaded themselves,
# with transformers' own calls, joins it through `adopt`.
_LOADED: dict[tuple[Any, ...], Subject] = {}
_EXAMPLES: dict[tuple[Any, ...], tuple[Any, dict[str, torch.Tensor]]] = {}  # tokenizer and example inputs, per run


def load(params: Params, dtype: str | None = None) -> Subject:
    """The run's model (the full model or the layer slice that fits, `neuronkit.slicing`), tokenizer and
    example inputs (`batch_size` × `seq_len` tokens for text), loaded once per kernel and shared.

    `dtype` overrides the run's. Cells that change the model (move it to a device, train it) work on a
    copy, or move it back."""
    from neuronkit import models

    dtype = dtype or params.dtype
    key = _key(params, dtype)
    if key not in _LOADED:
        piece = run_slice(params)
        model, weights, _ = models.load_slice(params.model, dtype, full_model=piece.full_model,
                                              layers=None if piece.full_model else piece.layers)
        tokenizer, example = _example(params)
        _LOADED[key] = Subject(model, tokenizer, model.config, example, models.task_of(model.config), weights, piece)
    return _LOADED[key]


@dataclass(frozen=True)
class Recipe:
    """What a notebook's own cells need to load the run's model with transformers' calls
    (`model_class.from_pretrained(path, dtype=..., **slice_kwargs)`) and run it on the run's inputs."""

    path: str  # the checkpoint directory
    dtype: torch.dtype  # the run's dtype
    slice_kwargs: dict[str, Any]  # config overrides that load the run's layer slice; {} for the full model
    inputs: dict[str, torch.Tensor]  # the run's example inputs (the model's forward arguments, labels included)
    tokenizer: Any  # PreTrainedTokenizerBase or None (vision and speech models)
    model_slice: ModelSlice  # what the run's stages run: the full model or a layer slice
    architecture: str = ""  # its class: config.json's `architectures[0]`, or inferred (`models.architecture_of`)

    def call(self, class_name: str, **extra: str) -> str:
        """The `from_pretrained` call this recipe stands for, as text (`extra`: more keywords, as source)."""
        words = [repr(self.path), f"dtype={self.dtype}", *(f"{k}={v!r}" for k, v in self.slice_kwargs.items()),
                 *(f"{k}={v}" for k, v in extra.items())]
        return f"{class_name}.from_pretrained({', '.join(words)})"


def recipe(params: Params) -> Recipe:
    """The checkpoint, dtype, layer-slice keywords and example inputs of the run, for cells that load the
    model themselves; `adopt` then hands what they loaded to the stage."""
    from neuronkit import models

    piece = run_slice(params)
    tokenizer, example = _example(params)
    return Recipe(str(models.resolve_model(params.model)), models.as_dtype(params.dtype),
                  {} if piece.full_model else slice_kwargs(models.load_config(params.model), piece.layers),
                  example, tokenizer, piece, models.architecture_of(params.model)[0])


def slice_kwargs(config: Any, layers: int | None) -> dict[str, Any]:
    """The `from_pretrained` keywords that build the first `layers` blocks of the model `config`
    describes (`num_hidden_layers=2`, and per-block lists cut to match): the config entries a slice
    changes (`neuronkit.slicing.sliced_config`). transformers then reads only the kept blocks' weights."""
    from neuronkit import slicing

    if layers is None:
        return {}
    sliced, stored = slicing.sliced_config(config, layers), config.to_dict()
    keys = [*slicing.rules()["layer_keys"], *slicing.rules()["per_layer_keys"]]
    return {key: getattr(sliced, key) for key in keys if key in stored and getattr(sliced, key) != stored[key]}


def adopt(params: Params, model: Any, loading_info: dict[str, Any] | None = None) -> Subject:
    """Make `model`, which the notebook's own cells loaded (`from_pretrained`, on the CPU or on a
    `neuron` device), the model this kernel's stage runs: no second read of the checkpoint.

    It must be what the run loads: the checkpoint's own class, in the run's dtype, with the
    blocks of the run's slice; otherwise one line says what differs. The stage gets it on the CPU (a
    device-resident model is copied back; the notebook's keeps running where it is). `loading_info`
    (`from_pretrained(..., output_loading_info=True)`) names weights the checkpoint and the class
    disagree on; without it they are the CPU baseline's record's (stage 01 loads with it). A model on a
    `neuron` core is also what the device checks run (`check(device_model=...)`): no third copy."""
    from neuronkit import models, slicing
    from neuronkit.errors import NeuronkitInputError
    from neuronkit.graph_compile import compare

    piece = run_slice(params)
    full = models.load_config(params.model)
    cls = models.model_class(full)
    if type(model) is not cls:
        raise NeuronkitInputError(f"the model to adopt is a {type(model).__name__}; this run's checkpoint "
                                  f"{params.model} loads as {cls.__name__}")
    want = slicing.block_counts(full if piece.full_model else slicing.sliced_config(full, piece.layers))
    have = slicing.block_counts(model.config)
    if have != want:
        raise NeuronkitInputError(f"the model to adopt has {have} blocks where this run runs "
                                  f"{piece.describe()} ({want}): load it with {recipe(params).call(cls.__name__)}")
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    name = str(dtype).removeprefix("torch.")
    if name != params.dtype:
        raise NeuronkitInputError(f"the model to adopt is in {name}; this run loads it in {params.dtype} "
                                  f"(from_pretrained(..., dtype=torch.{params.dtype}))")
    on_device = None
    if any(p.device.type != "cpu" for p in model.parameters()):
        on_device = model  # the learner's copy stays on its device, and the device checks run it
        model = compare.device_copy(model, "cpu")[0]  # tensor by tensor: no second copy on the device
    weights = _weights(params, model, loading_info, full, cls, piece)
    tokenizer, example = _example(params)
    subject = Subject(model.eval(), tokenizer, model.config, example, models.task_of(full), weights, piece, on_device)
    _LOADED[_key(params, name)] = subject
    return subject


def release_copy(params: Params) -> None:
    """Drop the CPU copy `adopt` made of a model the notebook holds on a device, once the stage that compared
    with it is done: the notebook's later cells (its own training loop) get that memory; a later `load`
    reads the checkpoint again."""
    key = _key(params, params.dtype)
    if key in _LOADED and _LOADED[key].device_model is not None:
        del _LOADED[key]


def _weights(params: Params, model: Any, info: dict[str, Any] | None, full: Any, cls: type,
             piece: ModelSlice) -> Any:
    """Where an adopted model's weights came from, and what the checkpoint and its class disagree on."""
    from neuronkit import models, slicing

    if info is None:
        record = params.run.read("cpu_baseline")
        recorded = record.evidence.weights if record is not None and record.evidence is not None else None
        if recorded is not None and recorded.source:
            return models.Weights(recorded.source, tuple(recorded.missing), tuple(recorded.unexpected))
    source = "random" if getattr(model.config, models.RANDOM_WEIGHTS_KEY, False) is True else "checkpoint"
    info = info or {}
    left_out = set() if piece.full_model else slicing.dropped_keys(full, model.config, cls)
    return models.Weights(source, tuple(sorted(info.get("missing_keys", ()))),
                          tuple(sorted(k for k in info.get("unexpected_keys", ()) if k not in left_out)))


def _key(params: Params, dtype: str) -> tuple[Any, ...]:
    return (params.model, dtype, params.layers, params.full_model, params.batch_size, params.seq_len)


def _example(params: Params) -> tuple[Any, dict[str, torch.Tensor]]:
    """The run's tokenizer and example inputs, made once per kernel (deterministic: every kernel of a run
    makes the same ones)."""
    key = (params.model, params.batch_size, params.seq_len)
    if key not in _EXAMPLES:
        from neuronkit import inputs, models

        tokenizer = _tokenizer(params.model)
        _EXAMPLES[key] = tokenizer, inputs.example_inputs(
            models.load_config(params.model), tokenizer, batch_size=params.batch_size, seq_len=params.seq_len,
            processor=inputs.processor_config(params.model))
    return _EXAMPLES[key]


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
    tmp = file.with_name(f"{file.name}.{os.getpid()}.tmp")  # kernels side by side may plan at once
    tmp.write_text(json.dumps({"request": request, "slice": dataclasses.asdict(piece)}), encoding="utf-8")
    tmp.replace(file)
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
    (made the current core, which is what the check's "neuron" means; a model the notebook put on that
    core and `adopt`ed is the one they run), held to the CPU baseline's reference."""
    from neuronkit.checks import Reference, check

    core = neuron_device(device).index or 0
    torch.neuron.set_device(core)
    subject = load(params)
    mine = subject.device_model
    on_core = mine is not None and all(p.device == torch.device("neuron", core) for p in mine.parameters())
    report = check(subject.model, tokenizer=subject.tokenizer, stages=stages, dtype=params.dtype,
                   device_model=mine if on_core else None,
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
