"""Calling a model the one way every stage does: its forward on example inputs, and greedy generation.

The audit, the parity checks and the CPU baseline all call models through these, so they feed a model
the same arguments and pick the same pad token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def call(model: Any, inputs: Any, **extra: Any) -> Any:
    """`model(**inputs)`, `model(*inputs)` or `model(inputs)`, whichever the inputs' type means."""
    if isinstance(inputs, Mapping):  # a dict, or a tokenizer's BatchEncoding
        return model(**inputs, **extra)
    if isinstance(inputs, (list, tuple)):
        return model(*inputs, **extra)
    return model(inputs, **extra)


def generation_prompt(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The example inputs `generate()` takes: without labels and decoder inputs (it makes its own)."""
    return {k: v for k, v in inputs.items() if not k.startswith("decoder_") and k != "labels"}


def pad_token_id(model: Any, tokenizer: Any = None) -> int | None:
    """The pad token for generation: the tokenizer's, else the generation config's pad, else its end of
    sequence (what transformers falls back to, said out loud so it does not warn)."""
    pad = getattr(tokenizer, "pad_token_id", None)
    config = getattr(model, "generation_config", None)
    for candidate in (pad, getattr(config, "pad_token_id", None), getattr(config, "eos_token_id", None)):
        if isinstance(candidate, list):
            candidate = candidate[0] if candidate else None
        if candidate is not None:
            return int(candidate)
    return None


def greedy(model: Any, prompt: dict[str, torch.Tensor], max_new_tokens: int, tokenizer: Any = None,
           exact_length: bool = False) -> torch.Tensor:
    """Greedy decoding (deterministic, so another device can reproduce it token for token): the new
    tokens only, one row per prompt. `exact_length` forbids stopping early at end of sequence."""
    config = model.config
    # A decoder-only model returns the prompt, then the new tokens; an encoder-decoder its decoder start
    # token, then the new tokens.
    start = 1 if getattr(config, "is_encoder_decoder", False) else prompt["input_ids"].shape[1]
    length = {"min_new_tokens": max_new_tokens} if exact_length else {}
    with torch.no_grad():
        out = model.generate(**prompt, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=pad_token_id(model, tokenizer), **length)
    return out[:, start:]
