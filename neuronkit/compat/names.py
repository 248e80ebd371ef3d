"""Public PyTorch API names, and the ATen op PyTorch names after each: what `neuronkit compat` lists and what
the op audit records a model's calls as (`torch.overrides.resolve_name`, audit time only)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import resolve_name

from neuronkit.policy import base_name, load_policy, overload

# Public namespaces as PyTorch's override lists name them, and the ATen prefix of each one's ops.
ATEN_PREFIX = {"torch": "", "torch.Tensor": "", "torch.nn.functional": "", "torch.linalg": "linalg_",
               "torch.fft": "fft_", "torch.special": "special_"}
# Python operators whose ATen op has another name (PyTorch's operator convention).
OPERATORS = {"truediv": "div", "floordiv": "floor_divide", "mod": "remainder", "invert": "bitwise_not",
             "pos": "positive", "T": "numpy_T", "H": "adjoint", "mH": "adjoint"}
_KEPT_DUNDERS = ("__getitem__", "__setitem__")  # indexing; other non-operator dunders are object protocol


def public_name(func: Callable[..., Any]) -> tuple[str, str] | None:
    """(namespace, api) of a function, method or property getter as PyTorch names it publicly
    (`torch.Tensor.shape.__get__` -> (`torch.Tensor`, `shape`)); None for a private or unnamed one."""
    try:
        name = resolve_name(func)
    except Exception:  # noqa: BLE001 - an object resolve_name cannot hash or name: not a public API
        return None
    if not name:
        return None
    name = name.removesuffix(".__get__").replace("torch.functional.", "torch.")
    namespace, _, api = name.rpartition(".")
    if namespace not in ATEN_PREFIX or (api.startswith("_") and not operator(api) and api not in _KEPT_DUNDERS):
        return None
    return namespace, api


def operator(api: str) -> str | None:
    """`__mul__` -> `mul`, `__rsub__` -> `rsub`, `__iadd__` -> `add_`: the ATen op a Python operator runs."""
    if not (api.startswith("__") and api.endswith("__")):
        return None
    name = api[2:-2]
    candidates = [api, name, OPERATORS.get(name, "")]
    if name.startswith("r"):
        candidates += [name[1:], OPERATORS.get(name[1:], "")]
    if name.startswith("i"):
        candidates += [name[1:] + "_", OPERATORS.get(name[1:], "") + "_"]
    return next((c for c in candidates if c and c.strip("_") and hasattr(torch.ops.aten, c)), None)


@functools.lru_cache(maxsize=None)
def returns_host_values(name: str) -> bool:
    """Whether an ATen op (`aten::_local_scalar_dense`, overload or not) gives host values, not tensors: every
    overload of it that takes a tensor returns only Scalars, ints or bools (what `.item()` runs)."""
    base = f"aten::{base_name(name)}"
    found = False
    for qualified in load_policy().overloads:
        if qualified.split(".", 1)[0] != base:
            continue
        schema = overload(qualified)._schema
        if not any("Tensor" in str(a.type) for a in schema.arguments):
            continue  # a TorchScript scalar overload (`aten::add(Scalar a, Scalar b)`)
        if not schema.returns or any("Tensor" in str(r.type) for r in schema.returns):
            return False
        found = True
    return found
