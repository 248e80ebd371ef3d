"""The rules every `nki.isa` instruction (neuronkit/nki/isa.py, isa_extra.py) applies to its operands:
its arguments by name, how a result is fitted into `dst`, and the NumPy function an `op=` argument names.
Both instruction modules build on this one, so neither imports the other for them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from neuronkit.nki.errors import unsupported
from neuronkit.nki.tensors import Operand, origin


def bound(args: tuple, kwargs: dict, names: tuple[str, ...]) -> dict[str, Any]:
    """An instruction's arguments by name: the positional ones in the order of `names`, then the keywords."""
    by_name = dict(zip(names, args))
    by_name.update(kwargs)
    return by_name


def write(dst: Any, values: np.ndarray, what: str) -> None:
    """Write `values` into dst, the one rule for fitting a result into it: broadcast to its shape, or laid
    out in its shape when both hold the same elements per partition (an instruction sees each partition's
    elements as one stream)."""
    if not isinstance(dst, Operand):
        raise TypeError(f"{what}: dst must be a tensor, got {type(dst).__name__}")
    values = np.asarray(values)
    same_stream = (values.ndim and len(dst.shape) and values.shape[0] == dst.shape[0]
                   and values.size == int(np.prod(dst.shape)))
    if tuple(values.shape) != tuple(dst.shape) and same_stream:
        values = values.reshape(dst.shape)
    if tuple(values.shape) != tuple(dst.shape):
        try:
            values = np.broadcast_to(values, dst.shape)
        except ValueError:
            raise ValueError(f"{what}: result of shape {tuple(values.shape)} does not fit dst '{dst.name}' of shape "
                             f"{tuple(dst.shape)} at {origin()}") from None
    dst.write(values)


def op_function(op: Any, role: str) -> Callable[..., np.ndarray]:
    """The NumPy function behind an `op=` argument: an nki.language function or a NumPy ufunc."""
    if isinstance(op, np.ufunc):
        return op if role == "np_fn" else functools.partial(op.reduce)
    fn = getattr(op, role, None)
    if fn is None:
        raise unsupported(f"op={getattr(op, '__name__', op)!r} as an nki.isa {role.replace('_fn', '')} operation")
    return fn
