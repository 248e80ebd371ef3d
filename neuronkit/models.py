"""Loading the model a workbook run is about: a checkpoint directory, a config.json, or a bundled name.

Every stage resolves its MODEL argument here, so they all accept the same specs, refuse the same bad
input with the same one-line `NeuronkitInputError`, and refuse a model too large for memory before a
single weight is read. Nothing here reaches a model hub, runs remote code unless asked, or unpickles.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any, Union

import torch
from huggingface_hub.errors import StrictDataclassError
from safetensors import SafetensorError, safe_open
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from neuronkit.errors import NeuronkitInputError
from neuronkit.policy import data_dir

ModelSpec = Union[str, os.PathLike, PretrainedConfig]

BUNDLED_MODELS: tuple[str, ...] = ("tiny-qwen3", "tiny-bert", "qwen3-100m")
CONFIG_NAME = "config.json"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.txt", "vocab.json")
_WEIGHT_GLOBS = ("*.safetensors", "pytorch_model*.bin")
# Auto classes in the order tried when config.json names no architecture.
_TASKS: tuple[tuple[str, type], ...] = (
    ("causal LM (*ForCausalLM)", AutoModelForCausalLM),
    ("masked LM (*ForMaskedLM)", AutoModelForMaskedLM),
    ("base model", AutoModel),
)
_SUPPORTED = "; ".join(task for task, _ in _TASKS)
# What example_inputs tokenizes when the checkpoint ships a tokenizer: any fixed text would do.
_SAMPLE_TEXT = ("A migration starts with a model that already works on the CPU. The first step is to run "
                "the model once and save its outputs as the reference for every later step.")


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
            raise NeuronkitInputError(f"checkpoint directory {path} has no {CONFIG_NAME}")
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
    raw = _read_json(config_file)
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise NeuronkitInputError(f"{config_file} has no model_type")
    if model_type not in CONFIG_MAPPING and not (trust_remote_code and "auto_map" in raw):
        known = list(CONFIG_MAPPING.keys())
        close = difflib.get_close_matches(model_type, known, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        custom = "; it names custom code (auto_map): pass trust_remote_code=True if you trust it" \
            if "auto_map" in raw else ""
        raise NeuronkitInputError(
            f"{config_file}: unknown model_type {model_type!r}; {hint}transformers knows "
            f"{len(known)} model types{custom}")
    try:
        if path.is_dir():
            return AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code, local_files_only=True)
        return CONFIG_MAPPING[model_type].from_dict(raw)
    except (StrictDataclassError, ValueError, TypeError, KeyError, AttributeError, OSError) as exc:
        raise NeuronkitInputError(f"{config_file}: invalid configuration: {_one_line(exc)}") from None


def auto_class(config: PretrainedConfig) -> type:
    """The Auto class that builds this config's model: causal LM, masked LM, or base model.

    Chosen from `config.architectures`; with none named, the first task the model type supports.
    """
    names = list(getattr(config, "architectures", None) or [])
    if any(n.endswith(("ForCausalLM", "LMHeadModel")) for n in names):
        candidates = _TASKS[:1]
    elif any(n.endswith("ForMaskedLM") for n in names):
        candidates = _TASKS[1:2]
    elif names:
        candidates = _TASKS[2:]
    else:
        candidates = _TASKS
    for _, cls in candidates:
        if type(config) in cls._model_mapping:
            return cls
    wanted = ", ".join(names) or "no architecture"
    raise NeuronkitInputError(
        f"unsupported model: {wanted} (model_type {config.model_type!r}) has no matching transformers "
        f"class; supported: {_SUPPORTED} of a known model type")


def num_parameters(config: PretrainedConfig) -> int:
    """Parameter count of the model a config describes, from an instantiation on the meta device."""
    cls = auto_class(config)
    with torch.device("meta"):
        model = cls.from_config(config)
    return sum(p.numel() for p in model.parameters())


def estimate_bytes(config: PretrainedConfig, dtype: torch.dtype | str = torch.float32) -> int:
    """Bytes the model's parameters take in `dtype` (activations and optimizer state not included)."""
    return num_parameters(config) * as_dtype(dtype).itemsize


def load_model(spec: ModelSpec, dtype: torch.dtype | str = torch.float32, device_map: Any = None,
               weights: bool = True, *, trust_remote_code: bool = False,
               memory_budget: int | None = None) -> PreTrainedModel:
    """The model in eval mode: its checkpoint's weights, or random ones with `weights=False`.

    Refused before anything is allocated when the parameters exceed `memory_budget` (default: the
    memory available now).
    """
    dtype = as_dtype(dtype)
    config = load_config(spec, trust_remote_code=trust_remote_code)
    cls = auto_class(config)
    if not weights:
        _check_fits(spec, config, dtype, memory_budget)
        return cls.from_config(config, dtype=dtype, trust_remote_code=trust_remote_code).eval()
    path = resolve_model(spec) if not isinstance(spec, PretrainedConfig) else None
    if path is None or not path.is_dir() or not _weight_files(path):
        raise NeuronkitInputError(
            f"{_name(spec)} has no weights (model.safetensors); pass weights=False for random ones")
    _check_fits(spec, config, dtype, memory_budget)
    _check_safetensors(path)
    model = cls.from_pretrained(path, config=config, dtype=dtype, device_map=device_map,
                                trust_remote_code=trust_remote_code, local_files_only=True)
    return model.eval()


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


def example_inputs(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase | None = None,
                   batch_size: int = 1, seq_len: int = 16) -> dict[str, torch.Tensor]:
    """Deterministic model inputs: `input_ids` and `attention_mask`, plus `labels` for causal LMs.

    Token ids come from the tokenizer encoding a fixed text when there is one, else from a seeded
    generator over the vocabulary, so two runs see identical inputs.
    """
    batch_size = _positive_int("batch_size", batch_size)
    seq_len = _positive_int("seq_len", seq_len)
    text_config = config.get_text_config()
    limit = getattr(text_config, "max_position_embeddings", None)
    if isinstance(limit, int) and seq_len > limit:
        raise NeuronkitInputError(f"seq_len {seq_len} exceeds the model's max_position_embeddings {limit}")
    if tokenizer is not None:
        ids = tokenizer(_SAMPLE_TEXT, add_special_tokens=True)["input_ids"]
        row = torch.tensor((ids * (seq_len // len(ids) + 1))[:seq_len], dtype=torch.long)
    else:
        generator = torch.Generator().manual_seed(0)
        row = torch.randint(0, text_config.vocab_size, (seq_len,), generator=generator)
    input_ids = row.expand(batch_size, seq_len).clone()
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    if auto_class(config) is AutoModelForCausalLM:
        inputs["labels"] = input_ids.clone()
    return inputs


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """`torch.bfloat16` or its name (`"bfloat16"`, `"torch.bfloat16"`) as a torch.dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype).removeprefix("torch."), None) if isinstance(dtype, str) else None
    if not isinstance(value, torch.dtype):
        raise NeuronkitInputError(f"unknown dtype {dtype!r}; expected e.g. float32, bfloat16, float16")
    return value


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


def _check_safetensors(path: Path) -> None:
    """Open every safetensors file's header: a truncated or corrupt file fails here, in one line."""
    for file in path.glob("*.safetensors"):
        try:
            with safe_open(str(file), framework="pt"):
                pass
        except (SafetensorError, OSError) as exc:
            raise NeuronkitInputError(f"{file} is corrupt or truncated: {_one_line(exc)}") from None


def _read_json(file: Path) -> dict[str, Any]:
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise NeuronkitInputError(f"{file} is not valid JSON: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NeuronkitInputError(f"cannot read {file}: {_one_line(exc)}") from None
    if not isinstance(raw, dict):
        raise NeuronkitInputError(f"{file} must hold a JSON object, not {type(raw).__name__}")
    return raw


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise NeuronkitInputError(f"{name} must be a positive integer, got {value!r}")
    return value


def _name(spec: ModelSpec) -> str:
    if isinstance(spec, PretrainedConfig):
        return f"the {spec.model_type} config"
    return str(spec)


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
