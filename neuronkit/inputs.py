"""Example inputs for a model, built from its task, its config and its processor configs.

Every stage feeds a model the same deterministic inputs: token ids for text models (from the
checkpoint's tokenizer when it ships one), `pixel_values` for vision models (the image processor's size
and normalisation), `input_features` for speech models (the feature extractor's mel bins and frames),
decoder inputs for encoder-decoders, and labels that give each task its own loss. Inputs the model's
`forward` does not take are left out. A team can bring its own instead: prompts (a text file, one per
line) for a text model, or a safetensors file of named tensors for anything (`load_inputs`).
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any

import torch
from transformers import PretrainedConfig, PreTrainedTokenizerBase

from neuronkit import models
from neuronkit.errors import NeuronkitInputError, require_positive_ints
from neuronkit.pipeline.config import DEFAULTS

PROCESSOR_CONFIG = "preprocessor_config.json"
# What example inputs tokenize when the checkpoint ships a tokenizer: any fixed text would do.
SAMPLE_TEXT = ("A migration starts with a model that already works on the CPU. The first step is to run "
               "the model once and save its outputs as the reference for every later step.")
# Inputs whose second dimension is the sequence (the shape a text model's recompile probe varies).
SEQUENCE_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")


def example_inputs(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase | None = None,
                   batch_size: int = DEFAULTS.batch_size, seq_len: int = DEFAULTS.seq_len, *, processor: dict[str, Any] | None = None,
                   prompts: list[str] | None = None) -> dict[str, torch.Tensor]:
    """Deterministic inputs for the model `config` describes, with labels when its task has a loss.

    Text: `batch_size × seq_len` token ids and an all-ones attention mask. Vision: `pixel_values` of the
    processor's size, normalised as the processor would. Speech: `input_features` of the feature
    extractor's shape. Encoder-decoders add `decoder_input_ids` (the decoder start token, then the
    target), except classifiers, whose labels are classes (BART-style ones end each row with EOS). With `prompts`, a text model's token ids are the first `batch_size` prompts, padded to the
    longest and cut at `seq_len` (padding is masked out of the loss). Two runs see identical inputs.
    """
    require_positive_ints(batch_size=batch_size, seq_len=seq_len)
    task = models.task_of(config)
    processor = processor or {}
    if task == "other":
        raise NeuronkitInputError(
            f"{config.architectures[0]} has no input recipe in neuronkit (supported: {models.SUPPORTED}); "
            "pass your own example inputs (a safetensors file of named tensors)")
    accepted = _accepted(config)
    if prompts is not None and "input_ids" not in accepted:
        raise NeuronkitInputError(f"prompts are for text models; {config.architectures[0]} takes no input_ids: "
                                  "pass a .safetensors file of its inputs instead")
    if "pixel_values" in accepted:
        inputs = {"pixel_values": _pixels(config, processor, batch_size)}
    elif "input_features" in accepted:
        inputs = {"input_features": _features(config, processor, batch_size)}
    elif prompts is not None:
        inputs = _prompt_ids(tokenizer, prompts, batch_size, seq_len)
    else:
        ids = _token_ids(config, tokenizer, batch_size, seq_len)
        if task == "sequence_classification" and config.is_encoder_decoder and config.eos_token_id is not None:
            ids[:, -1] = config.eos_token_id  # BART-style classifiers pool at each row's end-of-sequence token
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    rows = next(iter(inputs.values())).shape[0]  # batch_size, or the number of prompts when fewer
    if task in ("sequence_classification", "image_classification"):
        inputs["labels"] = _class_labels(config, rows)
    elif config.is_encoder_decoder:
        target = _token_ids(config, tokenizer, rows, _decoder_length(config, seq_len))
        start = config.decoder_start_token_id if config.decoder_start_token_id is not None else config.pad_token_id
        inputs["decoder_input_ids"] = torch.cat([torch.full_like(target[:, :1], start), target[:, :-1]], dim=1)
        inputs["labels"] = target
    elif task in ("causal_lm", "masked_lm"):  # next-token / reconstruct-every-token loss, padding left out
        inputs["labels"] = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    elif task == "token_classification":
        length = inputs["input_ids"].shape[1]
        inputs["labels"] = torch.arange(length).remainder(config.num_labels).expand(rows, length).clone()
    return {k: v for k, v in inputs.items() if k in accepted}


def processor_config(spec: str | os.PathLike) -> dict[str, Any] | None:
    """The checkpoint's image processor or feature extractor settings (`preprocessor_config.json`)."""
    path = models.resolve_model(spec)
    file = path / PROCESSOR_CONFIG if path.is_dir() else None
    if file is None or not file.is_file():
        return None
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, OSError, UnicodeDecodeError) as exc:
        raise NeuronkitInputError(f"{file} is not valid JSON: {' '.join(str(exc).split())}") from None
    if not isinstance(raw, dict):
        raise NeuronkitInputError(f"{file} must hold a JSON object, not {type(raw).__name__}")
    return raw


def read_prompts(file: str | os.PathLike) -> list[str]:
    """A team's own prompts: the non-empty lines of a UTF-8 text file."""
    path = Path(file).expanduser()
    try:
        prompts = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise NeuronkitInputError(f"cannot read prompts file {path}: {' '.join(str(exc).split())}") from None
    if not prompts:
        raise NeuronkitInputError(f"prompts file {path} has no prompt (one per line)")
    return prompts


def load_inputs(file: str | os.PathLike) -> dict[str, torch.Tensor]:
    """A team's own example inputs: the named tensors of a safetensors file (read without unpickling)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(file).expanduser()
    if not path.is_file():
        raise NeuronkitInputError(f"inputs file {path} not found")
    if path.suffix != ".safetensors":
        raise NeuronkitInputError(f"inputs file {path} must be a .safetensors file of named tensors (or a .txt "
                                  "file of prompts for a text model)")
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError) as exc:
        raise NeuronkitInputError(f"{path} is corrupt or truncated: {' '.join(str(exc).split())}") from None
    if not tensors:
        raise NeuronkitInputError(f"inputs file {path} holds no tensors")
    return tensors


def varies_sequence(inputs: dict[str, Any]) -> bool:
    """True when the inputs are token sequences, whose length varies from request to request."""
    return isinstance(inputs, dict) and "input_ids" in inputs


def _accepted(config: PretrainedConfig) -> set[str]:
    """The keyword arguments the model's forward takes."""
    return set(inspect.signature(models.model_class(config).forward).parameters)


def _token_ids(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase | None, batch_size: int,
               seq_len: int) -> torch.Tensor:
    text_config = config.get_text_config(decoder=True) if config.is_encoder_decoder else config.get_text_config()
    limit = getattr(text_config, "max_position_embeddings", None)
    if isinstance(limit, int) and seq_len > limit:
        raise NeuronkitInputError(f"seq_len {seq_len} exceeds the model's max_position_embeddings {limit}")
    if tokenizer is not None:
        ids = tokenizer(SAMPLE_TEXT, add_special_tokens=True)["input_ids"]
        row = torch.tensor((ids * (seq_len // len(ids) + 1))[:seq_len], dtype=torch.long)
    else:
        generator = torch.Generator().manual_seed(0)
        row = torch.randint(0, text_config.vocab_size, (seq_len,), generator=generator)
    return row.expand(batch_size, seq_len).clone()


def _prompt_ids(tokenizer: PreTrainedTokenizerBase | None, prompts: list[str], batch_size: int,
                seq_len: int) -> dict[str, torch.Tensor]:
    if tokenizer is None:
        raise NeuronkitInputError("prompts need the checkpoint's tokenizer, and this model ships none")
    if tokenizer.pad_token is None and len(prompts[:batch_size]) > 1:
        raise NeuronkitInputError("the tokenizer has no pad token, so prompts of different lengths cannot share "
                                  "a batch; use batch size 1")
    encoded = tokenizer(prompts[:batch_size], padding=True, truncation=True, max_length=seq_len, return_tensors="pt")
    return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}


def _decoder_length(config: PretrainedConfig, seq_len: int) -> int:
    limit = getattr(config, "max_target_positions", None)
    return min(seq_len, limit) if isinstance(limit, int) else seq_len


def _class_labels(config: PretrainedConfig, batch_size: int) -> torch.Tensor:
    if getattr(config, "problem_type", None) == "regression" or config.num_labels == 1:
        return torch.zeros(batch_size, config.num_labels)
    return torch.arange(batch_size).remainder(config.num_labels)


def _pixels(config: PretrainedConfig, processor: dict[str, Any], batch_size: int) -> torch.Tensor:
    """A seeded random image, rescaled and normalised as the image processor would."""
    height, width = _image_size(config, processor)
    channels = getattr(config, "num_channels", 3)
    generator = torch.Generator().manual_seed(0)
    image = torch.randint(0, 256, (batch_size, channels, height, width), generator=generator).float()
    if processor.get("do_rescale", True):
        image = image * processor.get("rescale_factor", 1 / 255)
    if processor.get("do_normalize", True) and "image_mean" in processor:
        mean = torch.tensor(processor["image_mean"]).view(-1, 1, 1)
        std = torch.tensor(processor["image_std"]).view(-1, 1, 1)
        image = (image - mean) / std
    return image


def _image_size(config: PretrainedConfig, processor: dict[str, Any]) -> tuple[int, int]:
    size = processor.get("crop_size") if processor.get("do_center_crop") else processor.get("size")
    if isinstance(size, dict) and "height" in size and "width" in size:
        return int(size["height"]), int(size["width"])
    if isinstance(size, dict) and "shortest_edge" in size:
        return int(size["shortest_edge"]), int(size["shortest_edge"])
    side = getattr(config, "image_size", None)
    if isinstance(side, (list, tuple)):
        return int(side[0]), int(side[1])
    if isinstance(side, int):
        return side, side
    raise NeuronkitInputError(f"{config.architectures[0]}: no image size in its config or image processor config")


def _features(config: PretrainedConfig, processor: dict[str, Any], batch_size: int) -> torch.Tensor:
    """Seeded log-mel-like features of the feature extractor's shape (mel bins × the frames the encoder
    takes: Whisper's convolutions halve the frames to its `max_source_positions`)."""
    bins = processor.get("feature_size", getattr(config, "num_mel_bins", None))
    frames = processor.get("nb_max_frames")
    positions = getattr(config, "max_source_positions", None)
    if isinstance(positions, int):
        frames = 2 * positions
    if not isinstance(bins, int) or not isinstance(frames, int):
        raise NeuronkitInputError(f"{config.architectures[0]}: no feature size or frame count in its config "
                                  "or feature extractor config")
    generator = torch.Generator().manual_seed(0)
    return torch.randn(batch_size, bins, frames, generator=generator) * 0.5
