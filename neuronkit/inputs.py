"""Example inputs for a model, built from its task, its config and its processor configs.

Every stage feeds a model the same deterministic inputs, by what its `forward` takes: token ids for text
models (from the checkpoint's tokenizer when it ships one), `pixel_values` for vision models (the image
processor's size and normalisation), `input_features` (mel features) or `input_values` (a waveform) for
speech models, decoder inputs for encoder-decoders; and the labels that give each task its own loss
(`TASK_LABELS`). A model with no such labels (a base model, a detection or segmentation head) is trained on
the surrogate loss instead (`neuronkit.graph_compile.compare.loss_of`), and the records say so. Inputs the
model's `forward` does not take are left out. A team can bring its own instead: prompts (a text file, one
per line) for a text model, or a safetensors file of named tensors for anything (`load_inputs`).
"""

from __future__ import annotations

import inspect
import math
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
# Inputs whose last dimension is the sequence (the shape a text model's recompile probe varies).
SEQUENCE_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")
# The input each modality's models take; a model taking two of them (text and images) is multimodal.
MODALITY_INPUTS = {"input_ids": "text", "pixel_values": "images", "input_features": "speech features",
                   "input_values": "a waveform"}
# A multimodal model that takes text and images side by side (CLIP, SigLIP, ALIGN: a tower each) gets both;
# one that places image features at image tokens inside its text (LLaVA, PaliGemma) names its token in the config.
TEXT_AND_IMAGES = "input_ids+pixel_values"
IMAGE_TOKEN_KEYS = ("image_token_id", "image_token_index", "image_token")
# How each task's labels are made (what its loss is), as the records and the notebooks name it.
TASK_LABELS = {
    "causal_lm": "next-token prediction on the input tokens",
    "masked_lm": "reconstruction of every input token",
    "seq2seq_lm": "the decoder predicting the target tokens",
    "speech_seq2seq": "the decoder predicting the target tokens",
    "sequence_classification": "one class per example",
    "image_classification": "one class per example",
    "audio_classification": "one class per example",
    "next_sentence_prediction": "one is-next label per example",
    "token_classification": "one class per token",
    "question_answering": "an answer span (start and end token) per example",
    "multiple_choice": "the right choice of two per example",
    "pretraining": "the head's pre-training objectives",
    "ctc": "a CTC transcript per example",
}
# Pre-training heads trained on replaced-token detection (ELECTRA's discriminator): a 0/1 label per token
# (transformers' ElectraForPreTraining and FunnelForPreTraining docstrings: "0 indicates the token is an
# original token, 1 indicates the token was replaced"); the others take masked-LM labels.
REPLACED_TOKEN_DETECTION = ("ElectraForPreTraining", "FunnelForPreTraining")
# The choices of a multiple-choice example.
CHOICES = 2
# Token ids of a text model whose config has no vocabulary size: byte values.
BYTES = 256


def example_inputs(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase | None = None,
                   batch_size: int = DEFAULTS.batch_size, seq_len: int = DEFAULTS.seq_len, *, processor: dict[str, Any] | None = None,
                   prompts: list[str] | None = None) -> dict[str, torch.Tensor]:
    """Deterministic inputs for the model `config` describes, with the labels its task's loss needs.

    Text: `batch_size × seq_len` token ids and an all-ones attention mask (multiple choice: `CHOICES`
    rows per example). Vision: `pixel_values` of the processor's size, normalised as the processor would.
    Speech: `input_features` of the feature extractor's shape, or `input_values` a waveform the feature
    encoder turns into about `seq_len` frames. Encoder-decoder LMs and base models add
    `decoder_input_ids` (the decoder start token, then the target); a classifier's labels are classes
    (BART-style ones end each row with EOS). With `prompts`, a text model's token ids are the first
    `batch_size` prompts, padded to the longest and cut at `seq_len` (padding is masked out of the loss).
    Two runs see identical inputs.
    """
    require_positive_ints(batch_size=batch_size, seq_len=seq_len)
    task = models.task_of(config)
    processor = processor or {}
    accepted = _accepted(config)
    modality = _modality(config, accepted)
    if prompts is not None and modality != "input_ids":
        takes = "images beside its text" if modality == TEXT_AND_IMAGES else "no input_ids"
        raise NeuronkitInputError(f"prompts are for text models; {_name(config)} takes {takes}: "
                                  "pass a .safetensors file of its inputs instead")
    if modality == "pixel_values":
        inputs = {"pixel_values": _pixels(config, processor, batch_size)}
    elif modality == TEXT_AND_IMAGES:  # the text tower's ids and the vision tower's image, side by side
        ids = _token_ids(config, tokenizer, batch_size, seq_len)
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                  "pixel_values": _pixels(getattr(config, "vision_config", None) or config, processor, batch_size)}
    elif modality == "input_features":
        inputs = {"input_features": _features(config, processor, batch_size)}
    elif modality == "input_values":
        inputs = {"input_values": _waveform(config, batch_size, seq_len)}
    elif prompts is not None:
        inputs = _prompt_ids(tokenizer, prompts, batch_size, seq_len)
    else:
        ids = _token_ids(config, tokenizer, batch_size, seq_len)
        if task == "sequence_classification" and config.is_encoder_decoder and config.eos_token_id is not None:
            ids[:, -1] = config.eos_token_id  # BART-style classifiers pool at each row's end-of-sequence token
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    rows = next(iter(inputs.values())).shape[0]  # batch_size, or the number of prompts when fewer
    inputs |= _labels(config, task, tokenizer, inputs, accepted, rows, seq_len)
    if task == "multiple_choice":  # every example's text once per choice: (rows, CHOICES, length)
        inputs |= {k: v.unsqueeze(1).expand(-1, CHOICES, -1).clone() for k, v in inputs.items()
                   if k in SEQUENCE_INPUTS}
    return {k: v for k, v in inputs.items() if k in accepted}


def check_inputs(config: PretrainedConfig, inputs: dict[str, Any]) -> None:
    """A team's own inputs, refused in one line where any device would refuse them: a name the model's forward
    does not take (a weights file given as inputs), or token ids that are not integers or fall outside the
    vocabulary (a tokenizer of another model)."""
    cls = models.model_class(config)
    parameters = inspect.signature(cls.forward).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        unknown = sorted(name for name in inputs if name not in parameters)
        if unknown:
            raise NeuronkitInputError(f"the inputs hold {', '.join(unknown[:5])}{', ...' if len(unknown) > 5 else ''}"
                                      f", which {cls.__name__}'s forward does not take")
    reads = [name for name in (*MODALITY_INPUTS, "inputs_embeds") if name in parameters]
    if reads and not any(name in inputs for name in reads):
        raise NeuronkitInputError(f"the inputs hold none of what {cls.__name__} reads ({', '.join(reads)}): "
                                  f"{', '.join(sorted(inputs)[:5])}{', ...' if len(inputs) > 5 else ''}")
    ids = inputs.get("input_ids")
    if not isinstance(ids, torch.Tensor):
        return
    if ids.is_floating_point() or ids.is_complex() or ids.dtype is torch.bool:
        raise NeuronkitInputError(f"input_ids must be integer token ids, not {str(ids.dtype).removeprefix('torch.')}")
    vocab = getattr(models.text_config(config), "vocab_size", None)
    if isinstance(vocab, int) and ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        raise NeuronkitInputError(f"input_ids hold token ids {int(ids.min())}..{int(ids.max())}, outside the model's "
                                  f"vocabulary 0..{vocab - 1} (a tokenizer of another model?)")


def in_dtype(inputs: dict[str, Any], dtype: torch.dtype) -> dict[str, Any]:
    """`inputs` with their floating-point tensors (pixel values, waveforms, features) in `dtype`, the model's:
    a bfloat16 model takes bfloat16 images, as it must on any device. Token ids, integer masks and class
    labels keep theirs."""
    return {name: value.to(dtype) if isinstance(value, torch.Tensor) and value.is_floating_point() else value
            for name, value in inputs.items()}


def describe(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase | None = None,
             processor: dict[str, Any] | None = None) -> str:
    """Where the example inputs come from and what their labels train, in a sentence for the records: the
    checkpoint's tokenizer or processor, else the config alone (named: a checkpoint without a tokenizer gets
    seeded random token ids); the task's loss, else the surrogate loss."""
    modality = _modality(config, _accepted(config))
    if modality in ("input_ids", TEXT_AND_IMAGES):
        made = ("token ids from the checkpoint's tokenizer" if tokenizer is not None else
                "seeded random token ids below the config's vocab_size (the checkpoint ships no tokenizer)")
        if modality == TEXT_AND_IMAGES:
            made += ", beside a seeded random image" + (" shaped and normalised as its preprocessor_config.json "
                                                        "says" if processor else " shaped from the config")
    else:
        made = {"pixel_values": "a seeded random image", "input_features": "seeded random speech features",
                "input_values": "a seeded random waveform"}[modality]
        made += (" shaped and normalised as its preprocessor_config.json says" if processor else
                 " shaped from the config (the checkpoint ships no preprocessor_config.json)")
    labels = TASK_LABELS.get(models.task_of(config))
    loss = f"labels for {labels}" if labels else \
        "no labels for its task: trained on the surrogate loss (the mean square of its first output)"
    return f"{made}; {loss}"


def _labels(config: PretrainedConfig, task: str, tokenizer: PreTrainedTokenizerBase | None,
            inputs: dict[str, torch.Tensor], accepted: set[str], rows: int, seq_len: int) -> dict[str, torch.Tensor]:
    """The labels (and decoder inputs) of `task` for these inputs: empty when the task has none."""
    ids = inputs.get("input_ids")
    length = ids.shape[1] if ids is not None else seq_len
    per_row = torch.arange(rows)
    if task in ("sequence_classification", "image_classification", "audio_classification"):
        return {"labels": _class_labels(config, rows)}
    if task in ("multiple_choice", "next_sentence_prediction"):
        return {"labels": per_row.remainder(CHOICES)}
    if task == "question_answering":
        start = per_row.remainder(max(length - 1, 1))
        return {"start_positions": start, "end_positions": start + 1}
    if task == "token_classification":
        return {"labels": torch.arange(length).remainder(config.num_labels).expand(rows, length).clone()}
    if task == "ctc":
        return {"labels": _transcript(config, rows, max(length // 4, 1))}
    if task == "pretraining" and ids is not None:
        if models.model_class(config).__name__ in REPLACED_TOKEN_DETECTION:
            return {"labels": torch.arange(length).remainder(2).expand(rows, length).clone()}
        sentence = {k: per_row.remainder(2) for k in ("next_sentence_label", "sentence_order_label") if k in accepted}
        return {"labels": _masked(inputs), **sentence}
    if config.is_encoder_decoder and "decoder_input_ids" in accepted and task != "pretraining":
        target = _token_ids(config, tokenizer, rows, _decoder_length(config, seq_len))
        start = next((t for t in (getattr(config, "decoder_start_token_id", None), getattr(config, "pad_token_id", None))
                      if isinstance(t, int)), 0)
        decoder = torch.cat([torch.full_like(target[:, :1], start), target[:, :-1]], dim=1)
        return {"decoder_input_ids": decoder} | ({"labels": target} if task in TASK_LABELS else {})
    if task == "causal_lm" and ids is not None and length < 2:  # its loss would be NaN on any device
        raise NeuronkitInputError(f"seq_len {length} is too short for a causal LM's loss, which predicts each "
                                  "token from those before it: give at least 2 tokens")
    if task in ("causal_lm", "masked_lm") and ids is not None:  # next-token / every-token loss, padding left out
        return {"labels": _masked(inputs)}
    return {}


def _masked(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The token ids as language-model labels, padding left out of the loss (-100)."""
    return inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)


def _modality(config: PretrainedConfig, accepted: set[str]) -> str:
    """The one input of MODALITY_INPUTS the model's forward takes, or TEXT_AND_IMAGES for a model with a text and
    a vision tower side by side; refused in one line for a model that takes none, or two in another way (image
    tokens inside the text, or speech)."""
    taken = [name for name in MODALITY_INPUTS if name in accepted]
    if len(taken) == 1:
        return taken[0]
    image_token = next((key for key in IMAGE_TOKEN_KEYS if getattr(config, key, None) is not None), None)
    if "+".join(taken) == TEXT_AND_IMAGES and image_token is None:
        return TEXT_AND_IMAGES
    if "+".join(taken) == TEXT_AND_IMAGES:
        raise NeuronkitInputError(
            f"{_name(config)} places image features at image tokens inside its text ({image_token} in its config: a "
            "vision-language model); neuronkit's example inputs cover text, vision and speech models and text and "
            "image towers side by side (CLIP-style): pass your own inputs (a .safetensors file of named tensors)")
    if not taken:
        raise NeuronkitInputError(
            f"{_name(config)} takes none of {', '.join(MODALITY_INPUTS)}, so neuronkit has no example inputs for "
            "it; pass your own (a .safetensors file of named tensors)")
    kinds = " and ".join(MODALITY_INPUTS[name] for name in taken)
    raise NeuronkitInputError(
        f"{_name(config)} takes {kinds} together (a multimodal model); neuronkit's example inputs are for text, "
        "vision or speech models: pass your own inputs (a .safetensors file of named tensors)")


def _name(config: PretrainedConfig) -> str:
    return models.model_class(config).__name__


def processor_config(spec: str | os.PathLike) -> dict[str, Any] | None:
    """The checkpoint's image processor or feature extractor settings (`preprocessor_config.json`)."""
    path = models.resolve_model(spec)
    file = path / PROCESSOR_CONFIG if path.is_dir() else None
    if file is None or not file.is_file():
        return None
    return models.read_json(file)


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


def _transcript(config: PretrainedConfig, rows: int, length: int) -> torch.Tensor:
    """CTC targets: `length` seeded token ids per row, never the blank (the pad token)."""
    vocab = config.get_text_config().vocab_size
    blank = config.pad_token_id if isinstance(config.pad_token_id, int) else 0
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1, max(vocab, 2), (rows, length), generator=generator)
    return ids.masked_fill(ids == blank, 1 if blank != 1 else 2)


def _token_ids(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase | None, batch_size: int,
               seq_len: int) -> torch.Tensor:
    if problem := models.too_long(models.max_positions(config), seq_len):
        raise NeuronkitInputError(problem)
    if tokenizer is not None:
        ids = tokenizer(SAMPLE_TEXT, add_special_tokens=True)["input_ids"]
        row = torch.tensor((ids * (seq_len // len(ids) + 1))[:seq_len], dtype=torch.long)
    else:  # a character-level model without a vocabulary size (CANINE's code points): byte values
        generator = torch.Generator().manual_seed(0)
        vocab = getattr(models.text_config(config), "vocab_size", None)
        row = torch.randint(0, vocab or BYTES, (seq_len,), generator=generator)
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
    frames = getattr(config, "num_frames", None)  # a video model takes (batch, frames, channels, height, width)
    shape = (batch_size, *([frames] if isinstance(frames, int) else []), channels, height, width)
    generator = torch.Generator().manual_seed(0)
    image = torch.randint(0, 256, shape, generator=generator).float()
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
    raise NeuronkitInputError(f"{_name(config)}: no image size in its config or image processor config")


def _features(config: PretrainedConfig, processor: dict[str, Any], batch_size: int) -> torch.Tensor:
    """Seeded log-mel-like features of the feature extractor's shape (mel bins × the frames the encoder
    takes: Whisper's convolutions halve the frames to its `max_source_positions`)."""
    bins = processor.get("feature_size", getattr(config, "num_mel_bins", None))
    frames = processor.get("nb_max_frames")
    positions = getattr(config, "max_source_positions", None)
    if isinstance(positions, int):
        frames = 2 * positions
    if not isinstance(bins, int) or not isinstance(frames, int):
        raise NeuronkitInputError(f"{_name(config)}: no feature size or frame count in its config "
                                  "or feature extractor config")
    generator = torch.Generator().manual_seed(0)
    return torch.randn(batch_size, bins, frames, generator=generator) * 0.5


def _waveform(config: PretrainedConfig, batch_size: int, seq_len: int) -> torch.Tensor:
    """A seeded waveform the model's convolutional feature encoder turns into about `seq_len` frames (its
    strides' product samples per frame), one channel unless the config names more; for a spectrogram model
    (AST: `num_mel_bins` and `max_length` in its config), its (frames, mel bins) features."""
    generator = torch.Generator().manual_seed(0)
    bins, frames = getattr(config, "num_mel_bins", None), getattr(config, "max_length", None)
    if isinstance(bins, int) and isinstance(frames, int):  # a spectrogram transformer's (frames, mel bins) input
        return torch.randn(batch_size, frames, bins, generator=generator) * 0.5
    strides = getattr(config, "conv_stride", None)
    hop = math.prod(strides) if isinstance(strides, (list, tuple)) and strides else 320
    channels = getattr(config, "audio_channels", None)
    shape = (batch_size, *([channels] if isinstance(channels, int) and channels > 1 else []), hop * (seq_len + 1))
    return torch.randn(shape, generator=generator) * 0.1
