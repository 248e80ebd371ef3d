"""Input-aware policy rules: whether one call of an op uses a feature the device treats differently.

`data/op_support.toml` names these functions (`call_rule = "..."`) on the gaps that depend on a call's
arguments rather than on the op alone. Each takes the call's arguments bound to the schema's argument
names and answers yes or no; the simulated device's kernel and the op audit both use them, so they
agree. They are small and free of torch internals so the C++ kernel can port them as they are.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

_CHANNELS_LAST = (torch.channels_last, torch.channels_last_3d)


def sparse_flag(call: dict[str, Any]) -> bool:
    """`embedding(..., sparse=True)` / `embedding_bag(..., sparse=True)`: the gradient will be sparse."""
    return bool(call.get("sparse", False))


def mha_mask(call: dict[str, Any]) -> bool:
    """`_native_multi_head_attention` with a mask tensor (S: native_multi_head_attention.py:77-82)."""
    return call.get("mask") is not None


def mha_need_weights(call: dict[str, Any]) -> bool:
    """`_native_multi_head_attention` asked for attention weights (S: native_multi_head_attention.py:84-88,
    128-134); the schema's default is True."""
    return bool(call.get("need_weights", True))


def channels_last(call: dict[str, Any]) -> bool:
    """A channels_last memory format (S: cast_policy.py:38-50, validate_neuron_memory_format)."""
    return call.get("memory_format") in _CHANNELS_LAST


RULES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "sparse_flag": sparse_flag,
    "mha_mask": mha_mask,
    "mha_need_weights": mha_need_weights,
    "channels_last": channels_last,
}


def bind(names: tuple[str, ...], args: tuple, kwargs: dict) -> dict[str, Any]:
    """A call's arguments by schema argument name (positional first, then keywords)."""
    call = dict(zip(names, args))
    call.update(kwargs)
    return call
