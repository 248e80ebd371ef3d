"""NKI data types: what a tile holds, how the interpreter stores it in NumPy, and its torch twin.

NumPy has no bfloat16 (and neuronkit adds no dependency for it): bfloat16, tfloat32 and the float8 tiles are
held as float32 and rounded to their precision through torch every time they are written. Trainium's
`float8_e4m3` (IEEE-style, largest finite 240) is rounded like torch's `float8_e4m3fn` and then saturated
to +-240 (tests/conformance/known_differences.toml: NaN/inf encodings are not modelled). The microscaling
`*_x4` types pack four 8-bit (or 4-bit) values in one 32-bit element: tiles of them can be allocated, moved
and counted against SBUF, but not computed on (nisa.quantize_mx / nc_matmul_mx are not interpreted)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class DType:
    """One NKI dtype (`nl.float32`, `nl.bfloat16`, ...)."""

    name: str
    storage: np.dtype
    itemsize: int
    torch: torch.dtype

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    @property
    def is_float(self) -> bool:
        return self.storage.kind == "f"

    def round(self, values: np.ndarray) -> np.ndarray:
        """`values` as this dtype would hold them, in the storage dtype."""
        if self.name in _FLOAT8:
            narrow, limit = _FLOAT8[self.name]
            t = torch.from_numpy(np.array(values, dtype=np.float32))
            if limit is not None:
                t = t.clamp(-limit, limit)
            return t.to(narrow).float().numpy()
        if self.name in ("bfloat16", "tfloat32"):
            narrow = torch.bfloat16 if self.name == "bfloat16" else torch.float32
            t = torch.from_numpy(np.array(values, dtype=np.float32)).to(narrow)
            if self.name == "tfloat32":  # keep 10 mantissa bits
                bits = t.view(torch.int32) & ~0x1FFF
                return bits.view(torch.float32).numpy()
            return t.float().numpy()
        return np.asarray(values).astype(self.storage, copy=False)


def _d(name: str, storage: Any, itemsize: int, tdtype: torch.dtype) -> DType:
    return DType(name, np.dtype(storage), itemsize, tdtype)


# float8 dtype -> (the torch dtype that rounds like it, the largest finite value it saturates to)
_FLOAT8 = {
    "float8_e4m3": (torch.float8_e4m3fn, 240.0),
    "float8_e4m3fn": (torch.float8_e4m3fn, None),
    "float8_e5m2": (torch.float8_e5m2, None),
}
PACKED = ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4")

ALL = {d.name: d for d in (
    _d("float32", np.float32, 4, torch.float32),
    _d("float16", np.float16, 2, torch.float16),
    _d("bfloat16", np.float32, 2, torch.bfloat16),
    _d("tfloat32", np.float32, 4, torch.float32),
    _d("int32", np.int32, 4, torch.int32),
    _d("int16", np.int16, 2, torch.int16),
    _d("int8", np.int8, 1, torch.int8),
    _d("uint32", np.uint32, 4, torch.uint32),
    _d("uint16", np.uint16, 2, torch.uint16),
    _d("uint8", np.uint8, 1, torch.uint8),
    _d("bool_", np.bool_, 1, torch.bool),
    _d("float8_e4m3", np.float32, 1, torch.float8_e4m3fn),
    _d("float8_e4m3fn", np.float32, 1, torch.float8_e4m3fn),
    _d("float8_e5m2", np.float32, 1, torch.float8_e5m2),
    *(_d(name, np.uint32, 4, torch.uint32) for name in PACKED),
)}
_BY_TORCH = {d.torch: d for d in ALL.values() if d.name not in ("tfloat32", "float8_e4m3", *PACKED)}
_BY_NUMPY = {d.storage: d for d in ALL.values() if d.name not in ("bfloat16", "tfloat32", *_FLOAT8, *PACKED)}


def as_dtype(value: Any) -> DType:
    """An NKI dtype from an NKI dtype, a torch dtype, or anything NumPy reads as a dtype."""
    if isinstance(value, DType):
        return value
    if isinstance(value, torch.dtype):
        if value in _BY_TORCH:
            return _BY_TORCH[value]
        raise TypeError(f"{value} has no NKI equivalent (NKI tiles hold {', '.join(sorted(ALL))})")
    try:
        np_dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"{value!r} is not a data type NKI knows") from None
    if np_dtype == np.float64:
        raise TypeError("float64 is not an NKI data type: NeuronCore engines compute in at most 32 bits; "
                        "cast the input to float32 first")
    if np_dtype not in _BY_NUMPY:
        raise TypeError(f"{np_dtype} is not an NKI data type (NKI tiles hold {', '.join(sorted(ALL))})")
    return _BY_NUMPY[np_dtype]


def promote(a: DType, b: DType) -> DType:
    """The dtype of an element-wise result of tiles of dtypes `a` and `b` (the wider float wins)."""
    if a == b:
        return a
    if a.is_float != b.is_float:
        return a if a.is_float else b
    return a if a.itemsize >= b.itemsize else b
