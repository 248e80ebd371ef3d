"""The model a run works on, held once per process: the `Session`, which `check(session, steps)` runs on.

`Session.build` makes one from a MODEL spec or a module (`neuronkit.check`); in a notebook's kernel
`load(params)` makes the run's once for the notebook's cells and its stage, and `adopt` takes over a model the
cells loaded themselves. The runner's preflight decides the layer slice and the example inputs once per run
and hands both to the kernels (`hand_over`); notebooks run by hand decide in their first kernel.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch

from neuronkit import inputs as example, models, slicing
from neuronkit.errors import NeuronkitInputError
from neuronkit.evidence import ModelSlice, load as load_record
from neuronkit.graph_compile import compare
from neuronkit.pipeline.config import DEFAULTS, Params, RunConfig
from neuronkit.pipeline.host_products import device_products
from neuronkit.pipeline.reference import Reference


@dataclass(frozen=True)
class Compiled:
    """A model the caller compiled, `torch.compile(m, backend="neuron")` with `m` a copy of the checked model
    on the device, and called once for a training step (forward on the check's inputs, with its
    `forward_extras`, then backward), with what that first call took. The compile step reuses its graphs
    rather than compiling again, when it can; the graphs it counts are the `torch.neuron.get_dynamo_metrics()`
    records since the caller's last `reset_dynamo_metrics()`."""

    module: torch.nn.Module  # the OptimizedModule torch.compile returned
    forward_s: float  # the first forward call (it compiled the graphs), host seconds
    backward_s: float  # the first backward (it compiled the backward graphs), host seconds


def autocast(device: str, dtype: torch.dtype) -> contextlib.AbstractContextManager[Any]:
    """Autocast to `dtype` on `device` ("neuron", "cpu") for bfloat16/float16; float32: no autocast."""
    if dtype in (torch.bfloat16, torch.float16):
        mode: contextlib.AbstractContextManager[Any] = torch.autocast(device, dtype=dtype)
        return mode
    return contextlib.nullcontext()


def forward_extras(model: torch.nn.Module) -> dict[str, Any]:
    """Keyword arguments of every parity forward: Hugging Face models run without a KV cache (it is not
    an output worth comparing)."""
    return {"use_cache": False} if getattr(getattr(model, "config", None), "use_cache", None) is not None else {}


class Session:
    """The model under test and what every stage feeds it (see the module docstring). Per check call,
    `using` gives a view with what that call brings (the CPU baseline's reference, the caller's compiled
    model, a device model on the right core)."""

    def __init__(self, name: str, model: torch.nn.Module, inputs: Any, *, config: RunConfig = DEFAULTS,
                 tokenizer: Any = None, weights: models.Weights | None = None,
                 model_slice: ModelSlice | None = None) -> None:
        on_cpu = all(p.device.type == "cpu" for p in model.parameters())
        self.name = name
        self._cpu_model: torch.nn.Module | None = model if on_cpu else None
        # the model on a neuron core: passed there, or the notebook's (`adopt`); the device steps run it
        self.device_model: torch.nn.Module | None = None if on_cpu else model
        self.inputs = compare.move_inputs(inputs, "cpu")
        self.tokenizer = tokenizer
        self.config = config
        self.hf_config = getattr(model, "config", None)  # a layer slice's when the model is one
        self.weights = weights or models.Weights("module")
        self.model_slice = model_slice  # the full model or the layer slice (None: a module passed in)
        self.dtype = models.compute_dtype(config.dtype)
        self.tol = compare.tolerance_for(self.dtype)
        self.extra = forward_extras(model)
        # the input embeddings and head held fixed in every backward: on a layer slice they are most of its
        # parameters, and their gradients would double its memory
        self.freeze = model_slice is not None and not model_slice.full_model
        self.reference: Reference | None = None  # the CPU baseline's: the steps are held to it, not run again
        self.compiled: Compiled | None = None  # what the caller compiled, whose graphs the compile step reuses
        self.prompts_file: str | None = None  # the prompts the inputs were made from, when a file gave them
        if on_cpu:
            model.eval()  # the reference; a model on the device is put in eval mode while it is lent

    @property
    def model(self) -> torch.nn.Module:
        """The model on the CPU: the one given, or for a model given on the device a copy made (tensor by
        tensor) the first time something computes on the CPU; the compile step against a saved reference
        never does, so notebook 04 holds one copy of the weights."""
        if self._cpu_model is None:
            assert self.device_model is not None
            self._cpu_model = compare.device_copy(self.device_model, "cpu")[0].eval()
        return self._cpu_model

    @functools.cached_property
    def kind(self) -> str | None:
        """The task: "causal_lm", "masked_lm", "seq2seq_lm", ... (`neuronkit.models.TASKS`); None for a
        module that is not a Hugging Face model."""
        return models.task_of(self.hf_config) if hasattr(self.hf_config, "get_text_config") else None

    def using(self, *, reference: Reference | None = None, compiled: Compiled | None = None,
              device_model: torch.nn.Module | None = None, freeze: bool | None = None) -> Session:
        """A view of this session for one check call, with the CPU baseline's `reference` (its inputs
        replace the session's), the caller's `compiled` model, a `device_model` on the current core with
        this model's weights, or `freeze` set; the model itself is shared."""
        if device_model is not None and (not isinstance(device_model, torch.nn.Module) or
                                         any(p.device.type != "neuron" for p in device_model.parameters())):
            raise NeuronkitInputError("device_model must be a torch.nn.Module whose parameters are on a neuron device")
        view = copy.copy(self)
        if reference is not None:
            view.reference, view.inputs = reference, reference.inputs
        if compiled is not None:
            view.compiled = compiled
        if device_model is not None:
            view.device_model = device_model
        if freeze is not None:
            view.freeze = freeze
        return view

    def device_mode(self) -> contextlib.AbstractContextManager[Any]:
        """Autocast to the checked dtype on the device (fp32: no autocast)."""
        return autocast("neuron", self.dtype)

    @contextlib.contextmanager
    def cpu_mode(self) -> Iterator[None]:
        """The CPU side's counterpart of `device_mode`: autocast to the checked dtype on the CPU, its matrix
        products computed as the device computes them (`host_products`)."""
        with device_products(self.dtype), autocast("cpu", self.dtype):
            yield

    @classmethod
    def build(cls, model: Any, inputs: Any = None, *, config: RunConfig = DEFAULTS, tokenizer: Any = None,
              model_name: str | None = None, random_weights: bool = False) -> Session:
        """A session for `model`: a MODEL spec (its checkpoint's weights, or random ones; the full model or
        the layer slice `config` asks for or that fits) or a module, on `inputs` (default: the example inputs
        `config` shapes; a prompts `.txt` file or a `.safetensors` of named tensors)."""
        if not isinstance(random_weights, bool):
            raise NeuronkitInputError(f"random_weights must be True or False, got {random_weights!r}")
        name = model_name
        weights, processor, piece = models.Weights("module"), None, None
        dtype = models.compute_dtype(config.dtype)
        if isinstance(model, (str, os.PathLike)):
            name = name or str(model)
            spec = model
            model, weights, piece = slicing.load_slice(spec, dtype, layers=config.layers or None,
                                                       full_model=config.full_model,
                                                       random_weights=random_weights)  # config first
            tokenizer = tokenizer if tokenizer is not None else models.load_tokenizer(spec)
            processor = example.processor_config(spec)
        elif config.layers or config.full_model:
            raise NeuronkitInputError("layers and full_model slice a MODEL spec (a checkpoint); a module passed in "
                                      "runs as it is")
        prompts, prompts_file = None, None
        if isinstance(inputs, (str, os.PathLike)) and Path(inputs).suffix == ".txt":
            inputs, prompts, prompts_file = None, example.read_prompts(inputs), str(inputs)
        elif isinstance(inputs, (str, os.PathLike)):
            inputs = example.load_inputs(inputs)
        if not isinstance(model, torch.nn.Module):
            raise NeuronkitInputError(f"model must be a torch.nn.Module or a MODEL spec, got {type(model).__name__}")
        if inputs is None:
            inputs = _default_inputs(model, tokenizer, config, processor, prompts)
        hf_config = getattr(model, "config", None)
        if isinstance(inputs, dict) and hasattr(hf_config, "get_text_config"):
            example.check_inputs(hf_config, inputs)
        session = cls(name or type(model).__name__, model, inputs, config=config, tokenizer=tokenizer,
                      weights=weights, model_slice=piece)
        session.prompts_file = prompts_file
        return session


def _default_inputs(model: torch.nn.Module, tokenizer: Any, config: RunConfig, processor: dict[str, Any] | None,
                    prompts: list[str] | None) -> dict[str, torch.Tensor]:
    hf_config = getattr(model, "config", None)
    if hf_config is None or not hasattr(hf_config, "get_text_config"):
        raise NeuronkitInputError(f"{type(model).__name__} is not a Hugging Face model: pass inputs=")
    return example.example_inputs(hf_config, tokenizer, config.batch_size, config.seq_len, processor=processor,
                                  prompts=prompts)


# ---------------------------------------------------------------------------------------------------
# The run's session in a notebook's kernel.

# This kernel's sessions, by what they are loaded from: the notebook's own cells and its stage share one
# model, tokenizer and inputs, so each checkpoint file is read once per kernel (the CPU reference and the
# device checks run the run's own model, in its dtype). A model the notebook's cells loaded themselves, with
# transformers' own calls, joins it through `adopt`.
_LOADED: dict[tuple[Any, ...], Session] = {}
_EXAMPLES: dict[tuple[Any, ...], tuple[Any, dict[str, torch.Tensor]]] = {}  # tokenizer and example inputs, per run


def load(params: Params) -> Session:
    """The run's session (the full model or the layer slice that fits, `neuronkit.slicing`; its tokenizer
    and example inputs, `batch_size` × `seq_len` tokens for text), loaded once per kernel and shared.

    Cells that change the model (move it to a device, train it) work on a copy, or move it back."""
    config = dataclasses.replace(params.config, stage_options=())
    key = _key(params.model, config)
    if key not in _LOADED:
        piece = run_slice(params)
        model, weights, _ = slicing.load_slice(params.model, config.dtype, full_model=piece.full_model,
                                               layers=None if piece.full_model else piece.layers)
        tokenizer, inputs = _example(params)
        _LOADED[key] = Session(params.model, model, inputs, config=config, tokenizer=tokenizer, weights=weights,
                               model_slice=piece)
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
    piece = run_slice(params)
    tokenizer, inputs = _example(params)
    return Recipe(str(models.resolve_model(params.model)), models.as_dtype(params.config.dtype),
                  {} if piece.full_model else slice_kwargs(models.load_config(params.model), piece.layers),
                  inputs, tokenizer, piece, models.architecture_of(params.model)[0])


def slice_kwargs(config: Any, layers: int | None) -> dict[str, Any]:
    """The `from_pretrained` keywords that build the first `layers` blocks of the model `config`
    describes (`num_hidden_layers=2`, and per-block lists cut to match): the config entries a slice
    changes (`neuronkit.slicing.sliced_config`). transformers then reads only the kept blocks' weights."""
    if layers is None:
        return {}
    sliced, stored = slicing.sliced_config(config, layers), config.to_dict()
    keys = [*slicing.rules()["layer_keys"], *slicing.rules()["per_layer_keys"]]
    return {key: getattr(sliced, key) for key in keys if key in stored and getattr(sliced, key) != stored[key]}


def adopt(params: Params, model: Any, loading_info: dict[str, Any] | None = None) -> Session:
    """Make `model`, which the notebook's own cells loaded (`from_pretrained`, on the CPU or on a
    `neuron` device), the model this kernel's stage runs: no second read of the checkpoint.

    It must be what the run loads: the checkpoint's own class, in the run's dtype, with the
    blocks of the run's slice; otherwise one line says what differs. The stage gets it on the CPU (a
    device-resident model is copied back; the notebook's keeps running where it is). `loading_info`
    (`from_pretrained(..., output_loading_info=True)`) names weights the checkpoint and the class
    disagree on; without it they are the CPU baseline's record's (stage 01 loads with it). A model on a
    `neuron` core is also what the device checks run (the session's `device_model`): no third copy."""
    piece = run_slice(params)
    full = models.load_config(params.model)
    cls = models.model_class(full)
    if type(model) is not cls:
        raise NeuronkitInputError(f"the model to adopt is a {type(model).__name__}; this run's checkpoint "
                                  f"{params.model} loads as {cls.__name__}")
    want = slicing.block_counts(full if piece.full_model or piece.layers is None
                                else slicing.sliced_config(full, piece.layers))
    have = slicing.block_counts(model.config)
    if have != want:
        raise NeuronkitInputError(f"the model to adopt has {have} blocks where this run runs "
                                  f"{piece.describe()} ({want}): load it with {recipe(params).call(cls.__name__)}")
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    name = str(dtype).removeprefix("torch.")
    if name != params.config.dtype:
        raise NeuronkitInputError(f"the model to adopt is in {name}; this run loads it in {params.config.dtype} "
                                  f"(from_pretrained(..., dtype=torch.{params.config.dtype}))")
    on_device = None
    if any(p.device.type != "cpu" for p in model.parameters()):
        on_device = model  # the learner's copy stays on its device, and the device checks run it
        model = compare.device_copy(model, "cpu")[0]  # tensor by tensor: no second copy on the device
    weights = _weights(params, model, loading_info, full, cls, piece)
    tokenizer, inputs = _example(params)
    config = dataclasses.replace(params.config, stage_options=())
    session = Session(params.model, model, inputs, config=config, tokenizer=tokenizer, weights=weights,
                      model_slice=piece)
    session.device_model = on_device
    _LOADED[_key(params.model, config)] = session
    return session


def release_copy(params: Params) -> None:
    """Drop the CPU copy `adopt` made of a model the notebook holds on a device, once the stage that compared
    with it is done: the notebook's later cells (its own training loop) get that memory; a later `load`
    reads the checkpoint again."""
    key = _key(params.model, dataclasses.replace(params.config, stage_options=()))
    if key in _LOADED and _LOADED[key].device_model is not None:
        del _LOADED[key]


def _weights(params: Params, model: Any, info: dict[str, Any] | None, full: Any, cls: type,
             piece: ModelSlice) -> models.Weights:
    """Where an adopted model's weights came from, and what the checkpoint and its class disagree on."""
    if info is None:
        record = params.run.read("cpu_baseline")
        recorded = getattr(record.evidence, "weights", None) if record is not None else None
        if recorded is not None and recorded.source:
            return models.Weights(recorded.source, tuple(recorded.missing), tuple(recorded.unexpected))
    source = "random" if getattr(model.config, models.RANDOM_WEIGHTS_KEY, False) is True else "checkpoint"
    info = info or {}
    left_out = set() if piece.full_model else slicing.dropped_keys(full, model.config, cls)
    return models.Weights(source, tuple(sorted(info.get("missing_keys", ()))),
                          tuple(sorted(k for k in info.get("unexpected_keys", ()) if k not in left_out)))


def _key(model: str, config: RunConfig) -> tuple[Any, ...]:
    return (model, config.dtype, config.layers, config.full_model, config.batch_size, config.seq_len)


# ---------------------------------------------------------------------------------------------------
# What the stages run and on what: decided once per run.

SLICE_FILE, INPUTS_FILE = "slice.json", "inputs.safetensors"


def hand_over(params: Params, piece: ModelSlice, inputs: dict[str, torch.Tensor]) -> None:
    """Record in the run directory (`artifacts/model/`) what the runner's preflight decided: the layer slice
    the stages run and the example inputs they run on, which every kernel of the run then reads."""
    folder = params.run.artifact_dir("model")
    Reference(inputs, {}, None, None).save(folder / INPUTS_FILE)
    _write_slice(folder / SLICE_FILE, params.to_dict(), piece)


def run_slice(params: Params) -> ModelSlice:
    """What the run's stages run: the runner's decision (`hand_over`), or for notebooks run by hand the
    first kernel's that loads the model, read back by the others (`artifacts/model/slice.json`), so every
    stage runs the same blocks even when the memory free at its start differs."""
    folder = params.run.artifact_dir("model")
    if (decided := _decided(params)) is not None:
        return decided
    config = params.config
    _, piece = slicing.plan(models.load_config(params.model), layers=config.layers or None,
                            full_model=config.full_model, dtype=models.as_dtype(config.dtype))
    (folder / INPUTS_FILE).unlink(missing_ok=True)  # another run's: this one's kernels make their own
    _write_slice(folder / SLICE_FILE, params.to_dict(), piece)
    return piece


def _decided(params: Params) -> ModelSlice | None:
    """The slice decided for this run's request (what it depends on: the model and the run configuration's
    shared part, `Params.to_dict`), None when none was."""
    file = params.run.path / "artifacts" / "model" / SLICE_FILE
    stored = json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}
    if stored.get("request") != params.to_dict():
        return None
    piece: ModelSlice = load_record(ModelSlice, stored["slice"])
    return piece


def _write_slice(file: Path, request: dict[str, Any], piece: ModelSlice) -> None:
    tmp = file.with_name(f"{file.name}.{os.getpid()}.tmp")  # kernels side by side may plan at once
    tmp.write_text(json.dumps({"request": request, "slice": dataclasses.asdict(piece)}), encoding="utf-8")
    tmp.replace(file)


def _example(params: Params) -> tuple[Any, dict[str, torch.Tensor]]:
    """The run's tokenizer and example inputs, made once per kernel: the runner's (`hand_over`), else built
    (deterministic: every kernel of a run makes the same ones)."""
    key = (params.model, params.config.batch_size, params.config.seq_len, params.config.dtype)
    if key not in _EXAMPLES:
        handed = params.run.path / "artifacts" / "model" / INPUTS_FILE
        inputs = Reference.load(handed).inputs if handed.is_file() and _decided(params) is not None else \
            example.example_inputs(models.load_config(params.model), _tokenizer(params.model),
                                   batch_size=params.config.batch_size, seq_len=params.config.seq_len,
                                   processor=example.processor_config(params.model))
        _EXAMPLES[key] = _tokenizer(params.model), example.in_dtype(inputs, models.as_dtype(params.config.dtype))
    return _EXAMPLES[key]


@functools.lru_cache(maxsize=4)
def _tokenizer(model: str) -> Any:
    return models.load_tokenizer(model)


def neuron_device(device: str) -> torch.device:
    """`device` as a torch.device, refused with a clear message unless it is an existing neuron core."""
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


def on_core(session: Session, device: str) -> Session:
    """The session for device steps on `device` (made the current core, which is what the steps' "neuron"
    means): with the notebook's model when it is on that core, else making their own copy."""
    core = neuron_device(device).index or 0
    torch.neuron.set_device(core)
    mine = session.device_model
    if mine is None or all(p.device == torch.device("neuron", core) for p in mine.parameters()):
        return session
    view = copy.copy(session)  # the notebook's model is on another core: the steps make their own copy
    view._cpu_model, view.device_model = session.model, None
    return view


def ran_on(piece: ModelSlice | None) -> str:
    """A summary's note when a stage ran on a layer slice (nothing for the full model)."""
    return "" if piece is None or piece.full_model else f"; on {piece.describe()}"
