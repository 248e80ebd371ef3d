"""Calling a model the one way every stage does: its forward on example inputs, and greedy generation.

The audit, the parity checks and the CPU baseline all call models through these, so they feed a model
the same arguments and pick the same pad token.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch


def call(model: Any, inputs: Any, **extra: Any) -> Any:
    """`model(**inputs)`, `model(*inputs)` or `model(inputs)`, whichever the inputs' type means."""
    if isinstance(inputs, Mapping):  # a dict, or a tokenizer's BatchEncoding
        return model(**inputs, **extra)
    if isinstance(inputs, (list, tuple)):
        return model(*inputs, **extra)
    return model(inputs, **extra)


def seed_all(seed: int) -> None:
    """Seed every generator a forward or a training step may draw from: torch's (the device's random ops draw
    from the host's, as S's CPU fallbacks do), and NumPy's and Python's, which transformers' speech models draw
    their SpecAugment masks from (`_compute_mask_indices`)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@contextlib.contextmanager
def same_draws(seed: int = 0) -> Iterator[None]:
    """`seed_all(seed)` for the block, every generator's state restored after it: a model that draws in its
    forward (ViTMAE's random masking) draws the same numbers for the CPU reference and on the device."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        seed_all(seed)
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


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
