"""Loading the model a workbook run is about: a checkpoint directory, a config.json, or a bundled name.

Every stage resolves its MODEL argument here, so they all accept the same specs, refuse the same bad
input with the same one-line `NeuronkitInputError`, and refuse a model too large for memory before a
single weight is read. The model is always the checkpoint's own class (`config.architectures[0]`), so
no head is dropped; weights the class and the checkpoint disagree on are reported, never silent.
Nothing here reaches a model hub, runs remote code unless asked, or unpickles beyond `weights_only`.
"""

from __future__ import annotations

import difflib
import json
import os
import pickle
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Union

import torch
import transformers
from huggingface_hub.errors import StrictDataclassError
from safetensors import SafetensorError, safe_open
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForAudioClassification,
    AutoModelForCausalLM,
    AutoModelForCTC,
    AutoModelForImageClassification,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForNextSentencePrediction,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoModelForSpeechSeq2Seq,
    AutoModelForTokenClassification,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.utils import logging as hf_logging

from neuronkit.errors import DTYPES, NeuronkitInputError
from neuronkit.policy import data_dir

ModelSpec = Union[str, os.PathLike, PretrainedConfig]

BUNDLED_MODELS: tuple[str, ...] = ("tiny-qwen3", "tiny-bert", "qwen3-100m")
CONFIG_NAME = "config.json"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.txt", "vocab.json")
_WEIGHT_GLOBS = ("*.safetensors", "pytorch_model*.bin")
# Set in the config.json of a checkpoint `save_random_checkpoint` wrote: its weights are random.
RANDOM_WEIGHTS_KEY = "neuronkit_random_weights"
# The tasks neuronkit gives labels for (`neuronkit.inputs`), with the Auto class mapping a config to the task's
# model class, in the order a config without `architectures` and without weights is resolved in (the first
# task its model type has). A transformers class in none of them (a detection, segmentation or depth head, a
# backbone, ...) is task `other`: it gets the inputs of its modality and, like a base model, the surrogate
# loss (`neuronkit.graph_compile.compare.loss_of`).
TASKS: tuple[tuple[str, str, type], ...] = (
    ("causal_lm", "causal LM", AutoModelForCausalLM),
    ("masked_lm", "masked LM", AutoModelForMaskedLM),
    ("seq2seq_lm", "encoder-decoder LM", AutoModelForSeq2SeqLM),
    ("speech_seq2seq", "speech encoder-decoder", AutoModelForSpeechSeq2Seq),
    ("base", "base model", AutoModel),
    ("sequence_classification", "sequence classification", AutoModelForSequenceClassification),
    ("token_classification", "token classification", AutoModelForTokenClassification),
    ("question_answering", "question answering", AutoModelForQuestionAnswering),
    ("multiple_choice", "multiple choice", AutoModelForMultipleChoice),
    ("next_sentence_prediction", "next-sentence prediction", AutoModelForNextSentencePrediction),
    ("pretraining", "pre-training head", AutoModelForPreTraining),
    ("image_classification", "image classification", AutoModelForImageClassification),
    ("audio_classification", "audio classification", AutoModelForAudioClassification),
    ("ctc", "speech recognition (CTC)", AutoModelForCTC),
)
SUPPORTED = ", ".join(label for _, label, _ in TASKS)


@dataclass(frozen=True)
class Weights:
    """Where a loaded model's weights came from, and what of the checkpoint did not fit its class."""

    source: str  # "checkpoint", "random" (built from the config), or "module" (a model passed in)
    missing: tuple[str, ...] = ()  # the class has them, the checkpoint does not: randomly initialised
    unexpected: tuple[str, ...] = ()  # the checkpoint has them, the class does not: dropped

    @property
    def random(self) -> bool:
        return self.source == "random"

    def warnings(self) -> list[str]:
        """One line per thing a verdict must show: random weights, missing or dropped checkpoint weights."""
        lines = ["random weights: built from config.json, not trained weights"] if self.random else []
        for keys, what in ((self.missing, "missing from the checkpoint (randomly initialised)"),
                           (self.unexpected, "in the checkpoint but not in the model class (dropped)")):
            if keys:
                shown = ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
                lines.append(f"{len(keys)} weight(s) {what}: {shown}")
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "missing": list(self.missing), "unexpected": list(self.unexpected),
                "warnings": self.warnings()}


def resolve_model(spec: str | os.PathLike) -> Path:
    """The checkpoint directory or config.json file a MODEL spec names.

    A path that exists wins; otherwise a bundled name (`tiny-qwen3`, `tiny-bert`, `qwen3-100m`) is looked
    up under `data/models/`.
    """
    if not isinstance(spec, (str, os.PathLike)):
        raise NeuronkitInputError(f"MODEL must be a path or a bundled model name, got {type(spec).__name__}")
    path = Path(spec).expanduser()
    if not path.exists() and str(spec) in BUNDLED_MODELS:
        path = data_dir() / "models" / str(spec)
        if not path.exists():
            raise NeuronkitInputError(f"bundled model {spec!r} is missing: {path} does not exist")
    if not path.exists():
        raise NeuronkitInputError(
            f"model {str(spec)!r} not found: no such file or directory, and not a bundled model "
            f"({', '.join(BUNDLED_MODELS)})")
    if path.is_dir():
        if not (path / CONFIG_NAME).is_file():
            raise NeuronkitInputError(f"checkpoint directory {path} has no {CONFIG_NAME} (a Hugging Face checkpoint "
                                      "is expected; check a plain nn.Module from Python: neuronkit.check(module, inputs))")
        return path
    if path.suffix != ".json":
        raise NeuronkitInputError(f"{path} is neither a checkpoint directory nor a config .json file")
    return path


def load_config(spec: ModelSpec, *, trust_remote_code: bool = False) -> PretrainedConfig:
    """The model's configuration, validated: readable JSON with a `model_type` transformers knows."""
    if isinstance(spec, PretrainedConfig):
        return spec
    path = resolve_model(spec)
    config_file = path / CONFIG_NAME if path.is_dir() else path
    raw = read_json(config_file)
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise NeuronkitInputError(f"{config_file} has no model_type")
    if model_type not in CONFIG_MAPPING and not (trust_remote_code and "auto_map" in raw):
        known = list(CONFIG_MAPPING.keys())
        close = difflib.get_close_matches(model_type, known, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        custom = "; it names custom code (auto_map), which neuronkit does not run: its models are " \
            "transformers' own classes" if "auto_map" in raw else ""
        raise NeuronkitInputError(
            f"{config_file}: unknown model_type {model_type!r}; {hint}transformers knows "
            f"{len(known)} model types{custom}")
    try:
        if path.is_dir():
            config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code, local_files_only=True)
        else:
            config = CONFIG_MAPPING[model_type].from_dict(raw)
    except (StrictDataclassError, ValueError, TypeError, KeyError, AttributeError, OSError) as exc:
        raise NeuronkitInputError(f"{config_file}: invalid configuration: {_one_line(exc)}") from None
    if not getattr(config, "architectures", None):  # a config saved on its own: the class is inferred
        config.architectures = [architecture_of(spec, config)[0]]
    return config


def architecture_of(spec: str | os.PathLike, config: PretrainedConfig | None = None) -> tuple[str, str]:
    """The class a MODEL spec runs as and where that comes from: config.json's `architectures`, else (a config
    saved on its own, common in training checkpoints) the model type's class whose weights match the
    checkpoint's best (a head's weights tell a classifier from a masked LM; names under the base-model prefix,
    `model.`, a class with a head from the base model; a head tied to the embeddings is not stored, as
    transformers saves it), the first in TASKS order of those that match as well; else without weights the
    class of the first task the model type has."""
    path = resolve_model(spec)
    config_file = path / CONFIG_NAME if path.is_dir() else path
    raw = read_json(config_file)
    if raw.get("architectures"):
        return raw["architectures"][0], "config.json"
    files = tuple(str(f) for f in _weight_files(path)) if path.is_dir() else ()
    key = (str(config_file), *((f, os.stat(f).st_mtime_ns) for f in (str(config_file), *files)))
    if key not in _INFERRED:  # every stage loads the config: the candidates are built once per process
        _INFERRED[key] = _inferred_architecture(config if config is not None else load_config(spec), files)
    return _INFERRED[key]


_INFERRED: dict[tuple[Any, ...], tuple[str, str]] = {}


def _inferred_architecture(config: PretrainedConfig, files: tuple[str, ...]) -> tuple[str, str]:
    candidates = list(dict.fromkeys(cls for _, _, auto in TASKS for cls in _mapped(auto, config)))
    if not candidates:
        raise NeuronkitInputError(f"unsupported model: model_type {config.model_type!r} has no transformers class "
                                  f"for any of: {SUPPORTED}")
    keys = _checkpoint_keys(files)
    if not keys:
        return candidates[0].__name__, (f"config.json names no architecture and there are no weights: the first "
                                        f"task class of model_type {config.model_type}")
    fits: dict[type, _Fit] = {}
    refusals: list[NeuronkitInputError] = []
    for cls in candidates:
        try:
            fits[cls] = _fit(cls, config, keys)
        except NeuronkitInputError as exc:  # a class this config cannot build is not the checkpoint's
            refusals.append(exc)
    if not fits:
        raise refusals[0]  # the first task class's reason, in one line
    best = max(fits, key=lambda cls: fits[cls].score)  # the first of equals: TASKS order
    return best.__name__, _inferred_from(config, best, fits, len(keys))


@dataclass(frozen=True)
class _Fit:
    """How a candidate class's state dict fits a checkpoint's weight names, each checkpoint name matched as
    transformers' loading matches it: as it is, else with the class's base-model prefix (`model.`, `bert.`)
    stripped or added. The class's names are those `save_pretrained` writes: a weight tied to another
    (`tie_word_embeddings`: the LM head to the input embeddings) is not stored, and its absence is no gap."""

    matched: int  # checkpoint weights the class has
    renamed: int  # of those, matched only with the prefix stripped or added
    prefixed: int  # of those, matched as they are under the prefix
    missing: int  # weights the class stores that the checkpoint lacks
    unexpected: int  # checkpoint weights the class does not have
    prefix: str  # the class's base-model prefix with its dot ("model."), "" for none
    tied: tuple[tuple[str, str], ...]  # (weight, the weight it is tied to): not in a checkpoint

    @property
    def score(self) -> tuple[int, int, int]:
        """Fewest weights only one side has; then names as they are over names a prefix rewrite matches
        (keys under `model.` were saved from a class with a head, keys without it from the base model);
        then the most weights in common."""
        return -(self.missing + self.unexpected), -self.renamed, self.matched


def _fit(cls: type, config: PretrainedConfig, keys: frozenset[str]) -> _Fit:
    with torch.device("meta"), _quiet_transformers():
        model = build(cls, config)
    tied = tuple(sorted((getattr(model, "all_tied_weights_keys", None) or {}).items()))
    skipped = {name for name, _ in tied} | set(getattr(model, "_keys_to_ignore_on_save", None) or ())
    names = {k for k in model.state_dict() if k not in skipped}
    prefix = f"{cls.base_model_prefix}." if getattr(cls, "base_model_prefix", "") else ""
    found: set[str] = set()
    renamed = prefixed = 0
    for key in keys:  # transformers' rule (core_model_loading.py): as it is, else the prefix stripped or added
        name = key if key in names or not prefix else key.removeprefix(prefix) \
            if key.startswith(prefix) and key.removeprefix(prefix) in names else f"{prefix}{key}"
        if name in names:
            found.add(name)
            renamed += name != key
            prefixed += name == key and bool(prefix) and key.startswith(prefix)
    return _Fit(len(found), renamed, prefixed, len(names - found), len(keys) - len(found), prefix, tied)


def _inferred_from(config: PretrainedConfig, best: type, fits: dict[type, _Fit], count: int) -> str:
    """Where an inferred class comes from, in words: the weights it matches, under which names, what a tied
    weight the checkpoint does not store is tied to, and the classes that fit as well."""
    fit = fits[best]
    parts = [f"{fit.matched} of {count} checkpoint weights"]
    if fit.renamed:
        parts.append(f"{fit.renamed} of them matched only with the base-model prefix {fit.prefix!r} stripped or "
                     "added, as transformers loads them")
    elif fit.prefixed:
        parts.append(f"named under {fit.prefix!r}: saved from a class with a head, not from the base model")
    elif fit.prefix:
        parts.append(f"named without {fit.prefix!r}: saved from the base model, not from a class with a head")
    if fit.tied:
        ties = ", ".join(f"{name} to {source}" for name, source in fit.tied)
        parts.append(f"tie_word_embeddings ties {ties}: a checkpoint does not store the tied copy")
    equal = [cls.__name__ for cls in fits if cls is not best and fits[cls].score == fit.score]
    if equal:
        task = next(label for _, label, auto in TASKS if best in _mapped(auto, config))
        parts.append(f"{', '.join(equal)} fit as well: its task, {task}, comes first in neuronkit's task order")
    return (f"config.json names no architecture: the {config.model_type} class whose weights match the "
            f"checkpoint's ({'; '.join(parts)})")


def _checkpoint_keys(files: tuple[str, ...]) -> frozenset[str]:
    """The weight names of a checkpoint's files: safetensors headers, `.bin` pickles loaded (weights_only) onto
    the meta device."""
    return frozenset(key for file in files for key in _read_weight_file(file))


def _read_weight_file(file: str) -> Any:
    """One weight file's safetensors header keys, or its `.bin` pickle loaded (weights_only) onto the meta
    device; refused in one line when it is corrupt, truncated or unsafe."""
    try:
        if file.endswith(".safetensors"):
            with safe_open(file, framework="pt") as fh:
                return fh.keys()
        return torch.load(file, map_location="meta", weights_only=True, mmap=True)
    except (SafetensorError, OSError, RuntimeError, EOFError, pickle.UnpicklingError, ValueError) as exc:
        raise NeuronkitInputError(f"{file} is corrupt, truncated or unsafe: {_one_line(exc)}") from None


def task_of(config: PretrainedConfig) -> str:
    """The task of the config's own architecture (`config.architectures[0]`): one of TASKS, or `other` for a
    transformers class in none of their mappings (it gets its modality's inputs and the surrogate loss)."""
    names = list(getattr(config, "architectures", None) or [])
    for task, _, auto in TASKS:
        classes = _mapped(auto, config)
        if classes and (not names or any(cls.__name__ == names[0] for cls in classes)):
            return task
    if names:
        model_class(config)  # refuses a name transformers does not have
        return "other"
    raise NeuronkitInputError(
        f"unsupported model: model_type {config.model_type!r} has no transformers class for any of: {SUPPORTED}")


def model_class(config: PretrainedConfig) -> type[PreTrainedModel]:
    """The checkpoint's own class, `config.architectures[0]` (never a base class that drops a head);
    with no architecture named, the class of the first task the model type supports."""
    names = list(getattr(config, "architectures", None) or [])
    if not names:
        task = task_of(config)
        return next(_mapped(auto, config)[0] for name, _, auto in TASKS if name == task)
    cls = getattr(transformers, names[0], None) if names[0].isidentifier() else None
    if not (isinstance(cls, type) and issubclass(cls, PreTrainedModel)):
        raise NeuronkitInputError(
            f"architecture {names[0]!r} (model_type {config.model_type!r}) is not a transformers class: it needs "
            "custom code, which neuronkit never runs, or a newer transformers")
    return cls


def build(cls: type, config: PretrainedConfig, **kwargs: Any) -> Any:
    """`cls._from_config(config, **kwargs)`, with a config its class refuses to build from (a padding index
    past the vocabulary, heads that do not divide the hidden size, a missing optional library) refused in
    one line as bad input rather than raised from inside transformers."""
    try:
        return cls._from_config(config, **kwargs)
    except (AssertionError, ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, ImportError) as exc:
        raise NeuronkitInputError(f"cannot build {cls.__name__} from this config.json: {_one_line(exc)}") from None


def text_config(config: PretrainedConfig) -> PretrainedConfig:
    """The part of `config` that describes the text the model reads (an encoder-decoder's: its decoder's)."""
    return config.get_text_config(decoder=True) if config.is_encoder_decoder else config.get_text_config()


def max_positions(config: PretrainedConfig) -> int | None:
    """The longest sequence the model's position embeddings cover (`max_position_embeddings` of its
    `text_config`), or None when its config names no limit."""
    limit = getattr(text_config(config), "max_position_embeddings", None)
    return limit if isinstance(limit, int) else None


def too_long(limit: int | None, tokens: int, what: str = "seq_len") -> str | None:
    """Why `tokens` (`what`) do not fit a model whose positions end at `limit`, or None when they do."""
    if limit is not None and tokens > limit:
        return f"{what} {tokens} exceeds the model's max_position_embeddings {limit}"
    return None


def num_parameters(config: PretrainedConfig) -> int:
    """Parameter count of the model a config describes, from an instantiation on the meta device."""
    with torch.device("meta"):
        model = build(model_class(config), config)
    return sum(p.numel() for p in model.parameters())


def estimate_bytes(config: PretrainedConfig, dtype: torch.dtype | str = torch.float32) -> int:
    """Bytes the model's parameters take in `dtype` (activations and optimizer state not included)."""
    return num_parameters(config) * as_dtype(dtype).itemsize


def load_model(spec: ModelSpec, dtype: torch.dtype | str = torch.float32, device_map: Any = None,
               weights: bool = True, *, trust_remote_code: bool = False,
               memory_budget: int | None = None) -> PreTrainedModel:
    """The model in eval mode: its checkpoint's weights, or random ones with `weights=False`."""
    return load_checkpoint(spec, dtype, device_map, random_weights=not weights,
                           trust_remote_code=trust_remote_code, memory_budget=memory_budget)[0]


def load_checkpoint(spec: ModelSpec, dtype: torch.dtype | str = torch.float32, device_map: Any = None, *,
                    random_weights: bool = False, trust_remote_code: bool = False,
                    memory_budget: int | None = None,
                    config: PretrainedConfig | None = None) -> tuple[PreTrainedModel, Weights]:
    """The checkpoint's own class (`config.architectures[0]`) in eval mode, and where its weights came from.

    Weights the class has and the checkpoint lacks (or the reverse) are listed in the returned `Weights`.
    Refused before anything is allocated when the parameters exceed `memory_budget` (default: the memory
    available now); a checkpoint without weights is refused unless `random_weights`. `config` (a layer
    slice's, `neuronkit.slicing`) replaces the checkpoint's own: only the weights it keeps are read.
    """
    dtype = as_dtype(dtype)
    config = config if config is not None else load_config(spec, trust_remote_code=trust_remote_code)
    cls = model_class(config)
    if random_weights:
        _check_fits(spec, config, dtype, memory_budget)
        return build(cls, config, dtype=dtype).eval(), Weights("random")
    path = check_weights(spec)
    _check_fits(spec, config, dtype, memory_budget)
    try:
        with _quiet_transformers():
            model, info = cls.from_pretrained(path, config=config, dtype=dtype, device_map=device_map,
                                              trust_remote_code=trust_remote_code, local_files_only=True,
                                              output_loading_info=True, ignore_mismatched_sizes=True)
    except (RuntimeError, ValueError, OSError, EOFError, pickle.UnpicklingError) as exc:
        raise NeuronkitInputError(f"{path}: the weights do not load into {cls.__name__}: {_one_line(exc)}") from None
    if info.get("mismatched_keys"):  # loaded with ignore_mismatched_sizes only to name the first one here
        key, got, want = sorted(info["mismatched_keys"])[0][:3]
        raise _shape_error(path, key, got, want, cls)
    source = "random" if getattr(config, RANDOM_WEIGHTS_KEY, False) is True else "checkpoint"
    return model.eval(), Weights(source, tuple(sorted(info.get("missing_keys", ()))),
                                 tuple(sorted(info.get("unexpected_keys", ()))))


def save_random_checkpoint(spec: str | os.PathLike, dest: str | os.PathLike,
                           dtype: torch.dtype | str = torch.float32) -> Path:
    """Write the model `spec`'s config describes, with random weights, into `dest` beside the checkpoint's
    tokenizer and processor files, its config marked so that loading it reports random weights. For the
    workbook, whose notebooks each load a checkpoint directory."""
    model, _ = load_checkpoint(spec, dtype, random_weights=True)
    setattr(model.config, RANDOM_WEIGHTS_KEY, True)
    dest = Path(dest)
    with _quiet_transformers():  # no "Writing model shards" bar between the run's progress lines
        model.save_pretrained(dest, safe_serialization=True)
    source = resolve_model(spec)
    if source.is_dir():
        for file in source.iterdir():
            if file.is_file() and file.name != CONFIG_NAME and file.suffix not in (".safetensors", ".bin"):
                (dest / file.name).write_bytes(file.read_bytes())
    return dest


def has_weights(spec: str | os.PathLike) -> bool:
    """True when the MODEL spec is a checkpoint directory with weight files."""
    path = resolve_model(spec)
    return path.is_dir() and bool(_weight_files(path))


def check_weights(spec: ModelSpec) -> Path:
    """The checkpoint directory, once its weight files are known readable: safetensors headers parse, and
    `.bin` pickles load with `weights_only=True` (nothing in them executes) onto the meta device."""
    path = resolve_model(spec) if not isinstance(spec, PretrainedConfig) else None
    if path is None or not path.is_dir() or not _weight_files(path):
        raise NeuronkitInputError(
            f"{_name(spec)} has no weights (*.safetensors or pytorch_model*.bin); pass --random-weights "
            "(random_weights=True) to check it on random weights")
    for file in _weight_files(path):
        _read_weight_file(str(file))
    return path


def check_shapes(spec: str | os.PathLike) -> None:
    """Refuse a checkpoint whose safetensors weights have other shapes than the class config.json
    describes gives them, read from the file headers (no tensor is read, the model is built on meta)."""
    path = resolve_model(spec)
    config = load_config(spec)
    cls = model_class(config)
    with torch.device("meta"):
        expected = {k: tuple(v.shape) for k, v in build(cls, config).state_dict().items()}
    for file in sorted(path.glob("*.safetensors")) if path.is_dir() else []:
        with safe_open(str(file), framework="pt") as fh:
            for key in fh.keys():
                got, want = tuple(fh.get_slice(key).get_shape()), expected.get(key)
                if want is not None and got != want:
                    raise _shape_error(path, key, got, want, cls)


def _shape_error(path: Path, key: str, got: Any, want: Any, cls: type) -> NeuronkitInputError:
    return NeuronkitInputError(f"{path}: weight {key} has shape {list(got)} in the checkpoint but {list(want)} "
                               f"in the {cls.__name__} config.json describes")


def load_tokenizer(spec: str | os.PathLike, *,
                   trust_remote_code: bool = False) -> PreTrainedTokenizerBase | None:
    """The checkpoint's tokenizer, or None when it ships none (or MODEL is a bare config.json)."""
    path = resolve_model(spec)
    if not path.is_dir() or not any((path / name).is_file() for name in _TOKENIZER_FILES):
        return None
    try:
        return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, local_files_only=True)
    except (ValueError, OSError, json.JSONDecodeError) as exc:
        raise NeuronkitInputError(f"{path}: unreadable tokenizer: {_one_line(exc)}") from None


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """`torch.bfloat16` or its name (`"bfloat16"`, `"torch.bfloat16"`) as a torch.dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype).removeprefix("torch."), None) if isinstance(dtype, str) else None
    if not isinstance(value, torch.dtype):
        raise NeuronkitInputError(f"unknown dtype {dtype!r}; expected e.g. float32, bfloat16, float16")
    return value


def compute_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """`dtype` as a torch.dtype, refused unless the device computes in it (float32, bfloat16, float16)."""
    value = as_dtype(dtype)
    name = str(value).removeprefix("torch.")
    if name not in DTYPES:
        raise NeuronkitInputError(f"dtype {name} is not one the neuron device computes in; choose {', '.join(DTYPES)}")
    return value


def _mapped(auto: type, config: PretrainedConfig) -> tuple[type, ...]:
    """The model classes the Auto class `auto` builds for this config type (most types have one), or ()."""
    try:
        found = auto._model_mapping[type(config)]
    except (KeyError, ValueError):
        return ()
    return tuple(found) if isinstance(found, (list, tuple)) else (found,)


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No transformers load report on stderr: `Weights` carries what it says, and the verdicts show it."""
    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _available_memory() -> int:
    """Bytes of memory available to a new allocation now (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _check_fits(spec: ModelSpec, config: PretrainedConfig, dtype: torch.dtype, budget: int | None) -> None:
    budget = _available_memory() if budget is None else budget
    count = num_parameters(config)
    need = count * dtype.itemsize
    if need > budget:
        raise NeuronkitInputError(
            f"{_name(spec)} needs {_gb(need)} for {count / 1e9:.2f}B parameters in {str(dtype)[6:]}, more than "
            f"the memory budget of {_gb(budget)}; audit it weightless (neuronkit audit) or use a smaller dtype")


def _weight_files(path: Path) -> list[Path]:
    return sorted(f for pattern in _WEIGHT_GLOBS for f in path.glob(pattern))


def read_json(file: Path) -> dict[str, Any]:
    """A JSON file that must hold an object (a config), read or refused in one line."""
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise NeuronkitInputError(f"{file} is not valid JSON: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NeuronkitInputError(f"cannot read {file}: {_one_line(exc)}") from None
    if not isinstance(raw, dict):
        raise NeuronkitInputError(f"{file} must hold a JSON object, not {type(raw).__name__}")
    return raw


def _name(spec: ModelSpec) -> str:
    if isinstance(spec, PretrainedConfig):
        return f"the {spec.model_type} config"
    return str(spec)


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
