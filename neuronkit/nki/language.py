"""`nki.language` for machines without the Neuron SDK: the subset the public NKI tutorials and NKI-lib use.

Element-wise functions and reductions compute in float32 (as the engines do) and round to the result
tile's dtype. Results are new SBUF tiles; `matmul` results are float32 PSUM tiles. Any other name of
`nki.language` raises NotImplementedError naming it (see `neuronkit.nki.modules`)."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from neuronkit.nki import context, cost
from neuronkit.nki.dtypes import ALL as _DTYPES
from neuronkit.nki.dtypes import DType, as_dtype, promote
from neuronkit.nki.errors import NkiRuleError
from neuronkit.nki.hardware import core as _core
from neuronkit.nki.tensors import (
    ON_CHIP,
    DynSlice,
    NkiTensor,
    Operand,
    ParDim,
    allocate,
    check_partition,
    dtype_of,
    new_tile,
    origin,
    values_of,
    with_mask,
)

float32, float16, bfloat16, tfloat32 = (_DTYPES[n] for n in ("float32", "float16", "bfloat16", "tfloat32"))
int32, int16, int8, uint32, uint16, uint8, bool_ = (
    _DTYPES[n] for n in ("int32", "int16", "int8", "uint32", "uint16", "uint8", "bool_"))
float8_e4m3, float8_e4m3fn, float8_e5m2 = (_DTYPES[n] for n in ("float8_e4m3", "float8_e4m3fn", "float8_e5m2"))
float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4 = (
    _DTYPES[n] for n in ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4"))
dtype = DType  # `nl.dtype` / `nki.dtype` in annotations
tensor = NkiTensor  # `nl.tensor` in annotations


class _NKIObjectType(type):
    """Lets `Config(name=value)` set a class attribute declared without an annotation, which a dataclass's
    generated `__init__` does not accept (NKI-lib declares its `@dataclass` NKIObjects that way)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        accepted = inspect.signature(cls.__init__).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
            return super().__call__(*args, **kwargs)
        extra = {k: kwargs.pop(k) for k in list(kwargs) if k not in accepted}
        unknown = [k for k in extra if not hasattr(cls, k)]
        if unknown:
            raise TypeError(f"{cls.__name__} has no attribute {', '.join(unknown)} to set")
        obj = super().__call__(*args, **kwargs)
        for k, v in extra.items():
            setattr(obj, k, v)
        return obj


class NKIObject(metaclass=_NKIObjectType):
    """`nl.NKIObject`: the base of the configuration classes kernels pass around; plain Python here."""

sbuf, psum, hbm, shared_hbm, private_hbm = "sbuf", "psum", "hbm", "shared_hbm", "private_hbm"


class _TileSize:
    """`nl.tile_size`: the NeuronCore's tile limits (neuronkit/data/nki_hardware.toml)."""

    @property
    def pmax(self) -> int:
        return _core().pmax

    @property
    def psum_fmax(self) -> int:
        return _core().psum_fmax

    @property
    def gemm_stationary_fmax(self) -> int:
        return _core().gemm_stationary_fmax

    @property
    def gemm_moving_fmax(self) -> int:
        return _core().gemm_moving_fmax

    @property
    def bn_stats_fmax(self) -> int:
        return _core().bn_stats_fmax

    @property
    def total_available_sbuf_size(self) -> int:
        """SBUF bytes per partition a kernel may allocate."""
        return _core().sbuf_bytes_per_partition


tile_size = _TileSize()


def par_dim(size: int) -> ParDim:
    """Mark `size` as the partition dimension of an on-chip tensor's shape."""
    return ParDim(size)


def ds(start: int, size: int) -> DynSlice:
    """The slice start:start+size."""
    return DynSlice(start, size)


# ---------------------------------------------------------------------------------------------------
# Creation, indices, loops, SPMD


def ndarray(shape: Any, dtype: Any, buffer: str = sbuf, name: str = "", address: Any = None, **_: Any) -> NkiTensor:
    """A new tensor; its elements are unwritten until the kernel writes them. `address=(partition, byte
    offset)` places an on-chip tensor (checked to fit; not counted with the live tiles)."""
    return allocate(shape, dtype, buffer, name or None, what="nl.ndarray", address=address)


def zeros(shape: Any, dtype: Any, buffer: str = sbuf, name: str = "", **_: Any) -> NkiTensor:
    return full(shape, 0, dtype, buffer, name)


def ones(shape: Any, dtype: Any, buffer: str = sbuf, name: str = "", **_: Any) -> NkiTensor:
    return full(shape, 1, dtype, buffer, name)


def full(shape: Any, fill_value: Any, dtype: Any, buffer: str = sbuf, name: str = "", **_: Any) -> NkiTensor:
    tensor = allocate(shape, dtype, buffer, name or None, what="nl.full")
    tensor.write(fill_value)
    if tensor.buffer in ON_CHIP:  # an on-chip fill is a memset; an HBM one is data the kernel ships
        cost.charge("memset", tensor.shape)
    return tensor


def zeros_like(a: Operand, dtype: Any = None, buffer: str = sbuf, name: str = "") -> NkiTensor:
    return full(a.shape, 0, dtype or a.dtype, buffer, name)


def shared_identity_matrix(n: int, dtype: Any = uint8, **_: Any) -> NkiTensor:
    """An n x n identity matrix in SBUF."""
    return new_tile(np.eye(n, dtype=np.float32), as_dtype(dtype), "nl.shared_identity_matrix")


def shared_constant(constant: Any, dtype: Any = None, **_: Any) -> NkiTensor:
    """A constant array (NumPy or a list) as an HBM tensor the kernel can read."""
    values = np.asarray(constant)
    out = as_dtype(dtype) if dtype is not None else as_dtype(values.dtype)
    tensor = allocate(values.shape, out, hbm, what="nl.shared_constant")
    tensor.write(values)
    return tensor


def arange(start: int, stop: int | None = None, step: int = 1) -> np.ndarray:
    """An index tile: `nl.arange(128)[:, None]` indexes 128 partitions."""
    return np.arange(start, stop, step) if stop is not None else np.arange(start)


class _Grid(tuple):
    """The index tiles of `nl.mgrid[...]`; `.p` and `.x` name the partition and first free index."""

    @property
    def p(self) -> np.ndarray:
        return self[0]

    @property
    def x(self) -> np.ndarray:
        return self[1]

    @property
    def y(self) -> np.ndarray:
        return self[2]


class _MGrid:
    def __getitem__(self, key: Any) -> _Grid:
        return _Grid(np.ogrid[key] if isinstance(key, tuple) else (np.ogrid[key],))


mgrid = _MGrid()


def affine_range(start: int, stop: int | None = None, step: int = 1) -> range:
    """A loop whose iterations do not depend on each other (the compiler may reorder them)."""
    return range(start) if stop is None else range(start, stop, step)


sequential_range = static_range = dynamic_range = affine_range


def program_id(axis: int) -> int:
    """This program's index along `axis` of the SPMD launch grid (0 along axes the grid does not have:
    a kernel called without a grid is one program)."""
    launch = context.current()
    if axis < 0:
        raise IndexError(f"program_id({axis}): axes of the launch grid count from 0")
    return launch.program[axis] if axis < len(launch.grid) else 0


def num_programs(axis: int | None = None, axes: int | None = None) -> int:
    """The size of the launch grid along `axis` (`axes=` in today's API), or the number of programs."""
    axis = axes if axis is None else axis
    launch = context.current()
    if axis is None:
        return int(np.prod(launch.grid)) if launch.grid else 1
    return launch.grid[axis] if axis < len(launch.grid) else 1


def program_ndim() -> int:
    return len(context.current().grid)


# ---------------------------------------------------------------------------------------------------
# Data movement


def load(src: Any, mask: Any = None, dtype: Any = None, **_: Any) -> NkiTensor:
    """Copy a tile from HBM into SBUF (masked-off elements stay unwritten)."""
    if not isinstance(src, Operand):
        raise TypeError(f"nl.load takes an indexed HBM tensor, got {type(src).__name__}")
    if src.buffer in ON_CHIP:
        raise NkiRuleError(f"nl.load of {src.buffer} tensor '{src.name}' at {origin()}: nl.load moves data "
                           "from HBM to SBUF; the source is already on chip (use nl.copy).")
    access = with_mask(src, mask)
    values = access.read()
    out = as_dtype(dtype) if dtype is not None else src.dtype
    cost.charge_dma(values.size * src.dtype.itemsize, "nl.load")
    return new_tile(values, out, "the tile loaded by nl.load", mask=getattr(access, "valid", None))


def store(dst: Any, value: Any, mask: Any = None, **_: Any) -> None:
    """Copy an on-chip tile (or a scalar) to HBM."""
    if not isinstance(dst, Operand):
        raise TypeError(f"nl.store takes an indexed HBM tensor as dst, got {type(dst).__name__}")
    if dst.buffer in ON_CHIP:
        raise NkiRuleError(f"nl.store into {dst.buffer} tensor '{dst.name}' at {origin()}: nl.store moves data "
                           "from SBUF to HBM; write on-chip tiles by assignment (tile[...] = value).")
    target = with_mask(dst, mask)
    target.write(values_of(value, where=mask))
    cost.charge_dma(math.prod(target.shape) * dst.dtype.itemsize, "nl.store")


def copy(x: Any, dtype: Any = None, mask: Any = None, **_: Any) -> NkiTensor:
    return _elementwise("copy", lambda v: v, (x,), dtype, mask, "tensor_copy")


copy.np_fn = lambda v: v  # `nisa.activation(op=nl.copy)`: the Scalar Engine's identity


def broadcast_to(x: Any, shape: Any) -> NkiTensor:
    """`x` repeated to `shape` (e.g. a [1, N] row to [128, N] partitions)."""
    values = values_of(x)
    try:
        out = np.broadcast_to(values, tuple(shape))
    except ValueError:
        raise ValueError(f"nl.broadcast_to: cannot broadcast a tile of shape {values.shape} to {tuple(shape)} "
                         f"at {origin()}") from None
    cost.charge("tensor_copy", out.shape)
    return new_tile(np.array(out), dtype_of(x) or float32, "the result of nl.broadcast_to")


# ---------------------------------------------------------------------------------------------------
# Element-wise math


def _elementwise(name: str, fn: Callable[..., np.ndarray], operands: tuple, dtype: Any, mask: Any,
                 instruction: str) -> Any:
    """`fn` on the operands' values into a new tile, charged as the ISA `instruction` the compiler emits."""
    if not any(isinstance(o, Operand) for o in operands):
        return fn(*(np.asarray(o) for o in operands))  # index arithmetic on index tiles
    dtypes = [d for d in (dtype_of(o) for o in operands) if d is not None]
    out = as_dtype(dtype) if dtype is not None else functools.reduce(promote, dtypes)
    values = partition_aligned([values_of(o, where=mask) for o in operands])
    if out.is_float or any(d.is_float for d in dtypes):
        values = [v.astype(np.float32) for v in values]
    with np.errstate(all="ignore"):
        result = np.asarray(fn(*values))
    cost.charge(instruction, result.shape)
    return new_tile(result, out, f"the result of nl.{name}", mask=None if mask is None else np.asarray(mask))


def partition_aligned(values: list[np.ndarray]) -> list[np.ndarray]:
    """Operands of lower rank aligned on the partition dimension (the first), not numpy's last: a tile's first
    dimension is its partitions, so a [128] tile (a free-axis reduction of a [128, N] tile without keepdims) is
    128 partitions of one element, broadcast along the free axis against [128, N] as the engines do. The NKI
    RMSNorm tutorial multiplies its [128, N] tile by such a reduction (`nl.multiply(a_tile, rms_reciprocal)`)."""
    rank = int(np.max([v.ndim for v in values]))  # `max` here is nl.max
    return [v.reshape(v.shape + (1,) * (rank - v.ndim)) if 0 < v.ndim < rank else v for v in values]


def _torch(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[np.ndarray], np.ndarray]:
    return lambda v: fn(torch.from_numpy(np.array(v, dtype=np.float32))).numpy()


_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh,
    "sqrt": np.sqrt, "rsqrt": lambda v: 1.0 / np.sqrt(v), "square": np.square, "abs": np.abs,
    "negative": np.negative, "reciprocal": lambda v: 1.0 / v, "sign": np.sign, "floor": np.floor,
    "ceil": np.ceil, "relu": lambda v: np.maximum(v, 0), "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "silu": lambda v: v / (1.0 + np.exp(-v)), "erf": _torch(torch.erf),
    "gelu": _torch(torch.nn.functional.gelu),
    "gelu_apprx_tanh": _torch(lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
    "softplus": _torch(torch.nn.functional.softplus), "mish": _torch(torch.nn.functional.mish),
    "logical_not": lambda v: (v == 0).astype(v.dtype),
    "gelu_apprx_sigmoid": lambda v: v / (1.0 + np.exp(-1.702 * v)),
}
_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power,
    "equal": lambda a, b: np.equal(a, b).astype(np.float32), "not_equal": lambda a, b: np.not_equal(a, b).astype(np.float32),
    "less": lambda a, b: np.less(a, b).astype(np.float32), "less_equal": lambda a, b: np.less_equal(a, b).astype(np.float32),
    "greater": lambda a, b: np.greater(a, b).astype(np.float32),
    "greater_equal": lambda a, b: np.greater_equal(a, b).astype(np.float32),
}


def _make_unary(name: str, fn: Callable[[np.ndarray], np.ndarray]) -> Callable[..., NkiTensor]:
    def unary(x: Any, dtype: Any = None, mask: Any = None, **_: Any) -> NkiTensor:
        return _elementwise(name, fn, (x,), dtype, mask, "activation")
    unary.__name__ = unary.__qualname__ = name
    unary.__doc__ = f"Element-wise {name} of a tile (nki.language.{name})."
    unary.np_fn = fn  # what nki.isa.activation applies
    return unary


def _make_binary(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., NkiTensor]:
    def binary(x: Any, y: Any, dtype: Any = None, mask: Any = None, **_: Any) -> NkiTensor:
        return _elementwise(name, fn, (x, y), dtype, mask, "tensor_tensor")
    binary.__name__ = binary.__qualname__ = name
    binary.__doc__ = f"Element-wise {name} of two tiles or a tile and a scalar (nki.language.{name})."
    binary.np_fn = fn  # what nki.isa.tensor_tensor / tensor_scalar apply
    return binary


for _name, _fn in _UNARY.items():
    globals()[_name] = _make_unary(_name, _fn)
for _name, _fn in _BINARY.items():
    globals()[_name] = _make_binary(_name, _fn)
Operand._ops = {n: globals()[n] for n in (*_BINARY, "negative", "abs", "broadcast_to")}


def where(condition: Any, x: Any, y: Any, dtype: Any = None, mask: Any = None) -> NkiTensor:
    return _elementwise("where", lambda c, a, b: np.where(c != 0, a, b), (condition, x, y), dtype, mask,
                        "tensor_tensor")


# ---------------------------------------------------------------------------------------------------
# Reductions along the free axes


def reduce_values(name: str, fn: Callable[..., np.ndarray], x: Any, axis: Any, keepdims: bool,
                  mask: Any = None) -> np.ndarray:
    """Reduce an on-chip tile along free axes; the partition axis (0) cannot be reduced by these engines."""
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    values = values_of(x, where=mask).astype(np.float32)
    axes = tuple(a % values.ndim for a in axes)
    if 0 in axes:
        raise NkiRuleError(
            f"{name} along axis 0 (the partition dimension) at {origin()}: the Vector and Scalar engines "
            "reduce along free axes only (axis >= 1), within each partition. To reduce across partitions, "
            "transpose the tile first (nl.transpose / nki.isa.nc_transpose) or multiply by a ones vector "
            "with nl.matmul.")
    with np.errstate(all="ignore"):
        return fn(values, axis=axes, keepdims=keepdims)


def _make_reduce(name: str, fn: Callable[..., np.ndarray], ufunc: Any) -> Callable[..., NkiTensor]:
    def reduction(x: Any, axis: Any, dtype: Any = None, mask: Any = None, keepdims: bool = False,
                  **_: Any) -> NkiTensor:
        result = reduce_values(f"nl.{name}", fn, x, axis, keepdims, mask)
        cost.charge("tensor_reduce", x.shape)
        return new_tile(result, as_dtype(dtype) if dtype is not None else x.dtype, f"the result of nl.{name}")
    reduction.__name__ = reduction.__qualname__ = name
    reduction.__doc__ = f"{name} of a tile along free axes (nki.language.{name})."
    reduction.np_fn = ufunc  # what nki.isa.tensor_tensor applies when `op=nl.max` etc.
    reduction.reduce_fn = fn
    return reduction


sum = _make_reduce("sum", np.sum, np.add)
max = _make_reduce("max", np.max, np.maximum)
min = _make_reduce("min", np.min, np.minimum)
mean = _make_reduce("mean", np.mean, None)
prod = _make_reduce("prod", np.prod, np.multiply)
globals()["add"].reduce_fn = np.sum
globals()["multiply"].reduce_fn = np.prod
globals()["maximum"].reduce_fn = np.max
globals()["minimum"].reduce_fn = np.min


def softmax(x: Any, axis: Any, dtype: Any = None, mask: Any = None, **_: Any) -> NkiTensor:
    shifted = values_of(x).astype(np.float32) - reduce_values("nl.softmax", np.max, x, axis, True)
    e = np.exp(shifted)
    for instruction in ("tensor_reduce", "activation", "tensor_reduce", "tensor_scalar"):  # max, exp, sum, scale
        cost.charge(instruction, x.shape)
    return new_tile(e / e.sum(axis=axis, keepdims=True), as_dtype(dtype) if dtype is not None else x.dtype,
                    "the result of nl.softmax")


# ---------------------------------------------------------------------------------------------------
# Tensor engine


def tensor_engine_matmul(stationary: Any, moving: Any, what: str) -> np.ndarray:
    """stationary[K, M]ᵀ @ moving[K, N] in float32, checking the Tensor Engine's tile limits."""
    core = _core()
    s, m = values_of(stationary), values_of(moving)
    if s.ndim != 2 or m.ndim != 2:
        raise ValueError(f"{what}: matmul operands are 2-D tiles, got {s.shape} and {m.shape} at {origin()}")
    (k, mm), (k2, n) = s.shape, m.shape
    where = origin()
    if k != k2:
        raise ValueError(f"{what}: contraction (partition) sizes differ: stationary {s.shape}, moving {m.shape} "
                         f"at {where}")
    if k > core.pmax:
        raise NkiRuleError(f"{what}: contraction dimension {k} > {core.pmax} partitions at {where}. The Tensor "
                           f"Engine contracts over the partition dimension: split K into tiles of "
                           f"{core.pmax} and accumulate them in one PSUM tile.")
    if mm > core.gemm_stationary_fmax:
        raise NkiRuleError(f"{what}: stationary tile {s.shape} has free size {mm} > "
                           f"{core.gemm_stationary_fmax} (nl.tile_size.gemm_stationary_fmax) at {where}. The "
                           f"stationary operand is at most {core.pmax} x {core.gemm_stationary_fmax}: tile M by "
                           f"{core.gemm_stationary_fmax}.")
    if n > core.gemm_moving_fmax:
        raise NkiRuleError(f"{what}: moving tile {m.shape} has free size {n} > {core.gemm_moving_fmax} "
                           f"(nl.tile_size.gemm_moving_fmax) at {where}. The moving operand is at most "
                           f"{core.pmax} x {core.gemm_moving_fmax} (one 2 KiB PSUM bank of float32 per "
                           f"partition): tile N by {core.gemm_moving_fmax}.")
    return s.astype(np.float32).T @ m.astype(np.float32)


def matmul(x: Any, y: Any, transpose_x: bool = False, mask: Any = None, **_: Any) -> NkiTensor:
    """x @ y into a new float32 PSUM tile; x is [M, K] (or [K, M] with transpose_x=True), y is [K, N]."""
    stationary = x if transpose_x else transpose(x)
    result = tensor_engine_matmul(stationary, y, "nl.matmul")
    cost.charge_matmul(stationary.shape, y.shape, float32 in (stationary.dtype, y.dtype))
    return new_tile(result, float32, "the result of nl.matmul", buffer=psum)


def transpose(x: Any, dtype: Any = None, mask: Any = None, **_: Any) -> NkiTensor:
    """Swap a 2-D tile's partition and free dimensions (both at most 128)."""
    values = values_of(x)
    if values.ndim != 2:
        raise ValueError(f"nl.transpose takes a 2-D tile, got shape {values.shape} at {origin()}")
    check_partition(values.shape[1], f"the transpose of a tile of shape {values.shape}")
    cost.charge_transpose(values.shape)
    return new_tile(values.T.copy(), as_dtype(dtype) if dtype is not None else x.dtype,
                    "the result of nl.transpose")


globals()["bool"] = bool_  # `nl.bool`, set last: the functions above use the builtin
