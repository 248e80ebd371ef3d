"""`nki.isa` for machines without the Neuron SDK: the instructions the public NKI tutorials and NKI-lib's
core kernels use; the other names NKI-lib touches exist and raise NotImplementedError when called.

Two generations of the API are accepted: the older one returns a new tile (`nc_matmul(stationary,
moving)`), the newer one writes into `dst` (`nc_matmul(dst, stationary, moving)`, `dst=` keyword). A
matmul into a PSUM tile accumulates into what the tile already holds; elements never written count as
zero (the first matmul of an accumulation group overwrites, as the tutorials rely on)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from neuronkit.nki import cost
from neuronkit.nki import isa_constants as constants  # noqa: F401 - `from nki.isa import constants`
from neuronkit.nki import language as nl
from neuronkit.nki.dtypes import as_dtype
from neuronkit.nki.errors import NkiRuleError, unsupported
from neuronkit.nki.hardware import core
from neuronkit.nki.isa_operands import bound as _bound
from neuronkit.nki.isa_operands import op_function as _fn
from neuronkit.nki.isa_operands import write as _write
from neuronkit.nki.isa_constants import (  # noqa: F401 - public names of nki.isa
    dge_mode,
    dma_engine,
    engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)
from neuronkit.nki.tensors import (
    NkiTensor,
    Operand,
    check_partition,
    dtype_of,
    new_tile,
    origin,
    values_of,
    with_mask,
)


unknown_engine, tensor_engine, vector_engine, scalar_engine, gpsimd_engine, sync_engine = (
    engine.unknown, engine.tensor, engine.vector, engine.scalar, engine.gpsimd, engine.sync)

# nki.isa instructions NKI-lib's kernels use that the interpreter does not execute: they exist (so kernels
# import) and raise NotImplementedError naming the instruction when called (docs/nki.md).
NOT_INTERPRETED = (
    "core_barrier", "dma_compute", "dropout", "local_gather", "nc_matmul_mx", "nc_n_gather",
    "nonzero_with_count", "quantize_mx", "rand", "register_alloc", "register_load", "register_move",
    "register_store", "select_reduce", "sendrecv", "sequence_bounds", "tensor_copy_dynamic_dst",
    "tensor_copy_dynamic_src",
)


def _not_interpreted(name: str) -> Callable[..., Any]:
    def instruction(*_: Any, **__: Any) -> Any:
        raise unsupported(f"nki.isa.{name}")
    instruction.__name__ = instruction.__qualname__ = name
    instruction.__doc__ = f"nki.isa.{name}: not executed by the interpreter; raises NotImplementedError naming it."
    return instruction


for _name in NOT_INTERPRETED:
    globals()[_name] = _not_interpreted(_name)


def get_nc_version() -> nc_version:
    """The NeuronCore generation of the target (neuronkit/data/nki_hardware.toml)."""
    return nc_version(core().nc_version)


def _emit(values: np.ndarray, dst: Any, dtype: Any, what: str, buffer: str = "sbuf") -> NkiTensor | None:
    """Write `values` into `dst` (newer API, returns None) or into a new tile (older API, returned)."""
    if dst is None:
        return new_tile(values, as_dtype(dtype) if dtype is not None else nl.float32, what, buffer)
    _write(dst, values, what)
    return None


def _split(args: tuple, kwargs: dict, names: tuple[str, ...], tiles: int) -> tuple[Any, dict]:
    """(dst, the other arguments by name) for both API generations. The older signature starts with
    `tiles` tensor parameters; one more leading tensor (or dst=) is the newer API's destination."""
    dst = kwargs.pop("dst", None)
    leading = next((i for i, a in enumerate(args) if not isinstance(a, Operand)), len(args))
    by_keyword = sum(1 for name in names[:tiles] if name in kwargs)  # `f(out[...], data=x, ...)`: out is dst
    if dst is None and leading and leading + by_keyword > tiles:
        dst, args = args[0], args[1:]
    return dst, _bound(args, kwargs, names)


def nc_matmul(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """stationary[K, M]ᵀ @ moving[K, N] on the Tensor Engine, into float32 PSUM."""
    dst = kwargs.pop("dst", None)
    if dst is None and len(args) >= 3 and all(isinstance(a, Operand) for a in args[:3]):
        dst, args = args[0], args[1:]
    stationary = kwargs.pop("stationary", args[0] if args else None)
    moving = kwargs.pop("moving", args[1] if len(args) > 1 else None)
    is_transpose = bool(kwargs.pop("is_transpose", False))
    for flag in ("is_stationary_onezero", "is_moving_onezero"):
        if kwargs.pop(flag, False):
            raise unsupported(f"nki.isa.nc_matmul({flag}=True)")
    for role, operand in (("stationary", stationary), ("moving", moving)):
        if isinstance(operand, Operand) and operand.buffer == "psum":
            raise NkiRuleError(f"nki.isa.nc_matmul: the {role} operand '{operand.name}' is in PSUM at {origin()}: "
                               "the Tensor Engine reads its operands from SBUF. Copy the tile to SBUF first "
                               "(nki.isa.tensor_copy or nl.copy).")
    result = nl.tensor_engine_matmul(stationary, moving, "nki.isa.nc_matmul")
    cost.charge_matmul(tuple(stationary.shape), tuple(moving.shape),
                       nl.float32 in (dtype_of(stationary), dtype_of(moving)))
    if dst is None:
        return new_tile(result, nl.float32, "the result of nki.isa.nc_matmul", buffer="psum")
    if dst.buffer != "psum":
        raise NkiRuleError(f"nki.isa.nc_matmul writes to PSUM, but dst '{dst.name}' is in {dst.buffer.upper()} "
                           f"at {origin()}: allocate it with buffer=nl.psum and copy it to SBUF afterwards "
                           "(nki.isa.tensor_copy).")
    if is_transpose:  # the Tensor Engine passes the stationary through: dst takes its dtype, nothing accumulates
        _write(dst, result, "nki.isa.nc_matmul(is_transpose=True)")
        return None
    if dst.dtype != nl.float32:
        raise NkiRuleError(f"nki.isa.nc_matmul accumulates in float32, but PSUM dst '{dst.name}' is "
                           f"{dst.dtype!r} at {origin()}: allocate it with dtype=nl.float32 and cast when "
                           "copying it out (nki.isa.tensor_copy(..., dtype=...)).")
    if not isinstance(dst, NkiTensor):
        raise unsupported("nki.isa.nc_matmul into a dst indexed by index tiles (use slices)")
    accumulate = kwargs.pop("accumulate", None)
    onto = dst.accumulated if accumulate is None else dst.written if accumulate else np.zeros(dst.shape, bool)
    previous = np.where(onto, dst.data, 0)
    _write(dst, previous + np.broadcast_to(result, dst.shape), "nki.isa.nc_matmul")
    dst.accumulated[...] = True
    return None


def nc_transpose(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """Transpose a tile of at most 128 x 128 through the Tensor Engine (into PSUM)."""
    dst, bound = _split(args, kwargs, ("data",), 1)
    values = values_of(bound["data"])
    if values.ndim != 2:
        raise ValueError(f"nki.isa.nc_transpose takes a 2-D tile, got {values.shape} at {origin()}")
    check_partition(values.shape[1], f"the transpose of a tile of shape {values.shape}")
    cost.charge_transpose(values.shape)
    return _emit(values.T.copy(), dst, dtype_of(bound["data"]), "the result of nki.isa.nc_transpose", "psum")


def dma_copy(dst: Any = None, src: Any = None, mask: Any = None, **_: Any) -> None:
    """Copy between any two memories (HBM <-> SBUF, HBM -> HBM) with the DMA engines."""
    if dst is None or src is None:
        raise TypeError("nki.isa.dma_copy(dst=..., src=...) needs both tensors")
    values = src.read() if isinstance(src, Operand) else np.asarray(src)
    cost.charge_dma(values.size * dst.dtype.itemsize, "dma_copy")
    if mask is not None:
        with_mask(dst, mask).write(values)
        return
    if values.size != int(np.prod(dst.shape)):
        raise ValueError(f"nki.isa.dma_copy: src of shape {values.shape} and dst '{dst.name}' of shape "
                         f"{tuple(dst.shape)} differ in size at {origin()}")
    dst.write(values.reshape(dst.shape))


def tensor_copy(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """Copy (and cast) an on-chip tile, e.g. a PSUM result into SBUF."""
    dst, bound = _split(args, kwargs, ("src", "dtype"), 1)
    src = bound["src"]
    values = values_of(src)
    cost.charge("tensor_copy", values.shape, bound.get("engine"))
    return _emit(values, dst, bound.get("dtype") or dtype_of(src), "the result of nki.isa.tensor_copy")


def activation(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """op(data * scale + bias) on the Scalar Engine; bias is a [partitions, 1] vector."""
    dst, bound = _split(args, kwargs, ("op", "data", "bias", "scale"), 0)
    reduce_res = bound.get("reduce_res")
    if reduce_res is not None and bound.get("reduce_cmd", reduce_cmd.reset_reduce) != reduce_cmd.reset_reduce:
        raise unsupported(f"nki.isa.activation(reduce_cmd={bound['reduce_cmd']}) (accumulating across instructions)")
    data = values_of(bound["data"]).astype(np.float32)
    cost.charge("activation" if reduce_res is None else "activation_reduce", data.shape)
    values = data * _scalar_or_tile(bound.get("scale", 1.0), data.ndim)
    if bound.get("bias") is not None:
        values = values + _scalar_or_tile(bound["bias"], data.ndim)
    with np.errstate(all="ignore"):
        result = _fn(bound["op"], "np_fn")(values)
    if reduce_res is not None:
        _reduce_into(reduce_res, result, bound.get("reduce_op"), (nl.add,), "nki.isa.activation")
    return _emit(result, dst, bound.get("dtype") or dtype_of(bound["data"]), "the result of nki.isa.activation")


def activation_reduce(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """activation, and the sum of its result along the free axes into reduce_res ([P, 1])."""
    kwargs.setdefault("reduce_cmd", reduce_cmd.reset_reduce)
    if kwargs.get("reduce_res") is None:
        raise TypeError("nki.isa.activation_reduce needs reduce_res=")
    return activation(*args, **kwargs)


def _reduce_into(reduce_res: Any, values: np.ndarray, op: Any, allowed: tuple, what: str) -> None:
    """Rule: the engine's reduction registers hold one value per partition, reduced with `allowed` ops."""
    if op not in allowed:
        names = ", ".join(f"nl.{getattr(a, '__name__', a)}" for a in allowed)
        raise NkiRuleError(f"{what}: reduce_op must be one of {names}, got {getattr(op, '__name__', op)} at {origin()}")
    flat = values.reshape(values.shape[0], -1)
    reduced = _fn(op, "reduce_fn")(flat, axis=1)  # one value per partition: [P] or [P, 1]
    _write(reduce_res, reduced.reshape(reduce_res.shape if reduce_res.size == reduced.size else (-1, 1)),
           f"{what} reduce_res")


def tensor_reduce(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """Reduce a tile along free axes with op (nl.add, nl.max, ...) on the Vector Engine."""
    dst, bound = _split(args, kwargs, ("op", "data", "axis", "negate", "keepdims"), 0)
    fn = _fn(bound["op"], "reduce_fn")
    result = nl.reduce_values("nki.isa.tensor_reduce", fn, bound["data"], bound["axis"],
                              bool(bound.get("keepdims", False)))
    cost.charge("tensor_reduce", bound["data"].shape)
    if bound.get("negate"):
        result = -result
    if dst is not None and result.ndim < len(dst.shape):
        result = result.reshape(tuple(dst.shape))
    return _emit(result, dst, bound.get("dtype") or dtype_of(bound["data"]), "the result of nki.isa.tensor_reduce")


def tensor_tensor(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """data1 op data2, element-wise, on the Vector Engine."""
    dst, bound = _split(args, kwargs, ("data1", "data2", "op"), 2)
    a, b = (values_of(bound[k]).astype(np.float32) for k in ("data1", "data2"))
    cost.charge("tensor_tensor", a.shape)
    with np.errstate(all="ignore"):
        result = _fn(bound["op"], "np_fn")(a, b)
    return _emit(np.asarray(result), dst, bound.get("dtype") or dtype_of(bound["data1"]),
                 "the result of nki.isa.tensor_tensor")


def tensor_scalar(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """(data op0 operand0) op1 operand1, with per-partition [P, 1] or scalar operands."""
    dst, bound = _split(args, kwargs, ("data", "op0", "operand0", "reverse0", "op1", "operand1", "reverse1"), 1)
    values = values_of(bound["data"]).astype(np.float32)
    cost.charge("tensor_scalar", values.shape, bound.get("engine"))
    for i in ("0", "1"):
        op = bound.get(f"op{i}")
        if op is None:
            continue
        operand = _scalar_or_tile(bound[f"operand{i}"], values.ndim)
        fn = _fn(op, "np_fn")
        with np.errstate(all="ignore"):
            values = fn(operand, values) if bound.get(f"reverse{i}") else fn(values, operand)
    return _emit(np.asarray(values), dst, bound.get("dtype") or dtype_of(bound["data"]),
                 "the result of nki.isa.tensor_scalar")


def reciprocal(*args: Any, **kwargs: Any) -> NkiTensor | None:
    dst, bound = _split(args, kwargs, ("data",), 1)
    with np.errstate(all="ignore"):
        result = 1.0 / values_of(bound["data"]).astype(np.float32)
    cost.charge("reciprocal", result.shape)
    return _emit(result, dst, bound.get("dtype") or dtype_of(bound["data"]), "the result of nki.isa.reciprocal")


def memset(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """Fill a tile with a value: `memset(dst=t, value=0.0)` or the older `memset(shape, value, dtype)`."""
    dst = kwargs.pop("dst", None)
    if dst is None and args and isinstance(args[0], Operand):
        dst, args = args[0], args[1:]
    if dst is not None:
        value = kwargs.get("value", args[0] if args else 0)
        cost.charge("memset", dst.shape, kwargs.get("engine"))
        _write(dst, np.asarray(value, dtype=np.float32), "nki.isa.memset")
        return None
    bound = _bound(args, kwargs, ("shape", "value", "dtype"))
    shape = tuple(bound["shape"])
    return nl.full(shape, bound["value"], bound["dtype"])


def _scalar_or_tile(x: Any, ndim: int = 2) -> Any:
    """A scalar, or a per-partition operand: a [P] or [P, 1] tile applies one value to each partition of a
    tile with `ndim` dimensions."""
    if isinstance(x, Operand):
        values = values_of(x).astype(np.float32)
        return values.reshape((-1,) + (1,) * (ndim - 1)) if values.size == values.shape[0] else values
    return x


def tensor_tensor_scan(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """Along the free axis: acc = op1(op0(data0[:, t], acc), data1[:, t]), starting from `initial`."""
    dst, bound = _split(args, kwargs, ("data0", "data1", "initial", "op0", "op1", "reverse0", "reverse1"), 2)
    if bound.get("reverse0") or bound.get("reverse1"):
        raise unsupported("nki.isa.tensor_tensor_scan(reverse0/reverse1=True)")
    a, b = (values_of(bound[k]).astype(np.float32) for k in ("data0", "data1"))
    if a.ndim != 2:
        raise unsupported(f"nki.isa.tensor_tensor_scan on a {a.ndim}-D tile")
    op0, op1 = _fn(bound["op0"], "np_fn"), _fn(bound["op1"], "np_fn")
    cost.charge("tensor_tensor_scan", a.shape)
    out = np.empty_like(a)
    acc = np.broadcast_to(_scalar_or_tile(bound.get("initial", 0)), (a.shape[0], 1))[:, 0].astype(np.float32)
    for t in range(a.shape[1]):
        acc = op1(op0(a[:, t], acc), b[:, t])
        out[:, t] = acc
    return _emit(out, dst, bound.get("dtype") or dtype_of(bound["data0"]), "the result of nki.isa.tensor_tensor_scan")


def scalar_tensor_tensor(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """(data op0 operand0) op1 operand1: a per-partition scalar step then an element-wise step with the tile
    operand1 (`data1=` in older releases)."""
    dst, bound = _split(args, kwargs, ("data", "op0", "operand0", "op1", "operand1"), 1)
    first = _fn(bound["op0"], "np_fn")
    values = values_of(bound["data"]).astype(np.float32)
    cost.charge("scalar_tensor_tensor", values.shape)
    operand = _scalar_or_tile(bound["operand0"], values.ndim)
    with np.errstate(all="ignore"):
        values = first(operand, values) if bound.get("reverse0") else first(values, operand)
        other = values_of(bound["operand1"] if "operand1" in bound else bound["data1"]).astype(np.float32)
        second = _fn(bound["op1"], "np_fn")
        values = second(other, values) if bound.get("reverse1") else second(values, other)
    return _emit(np.asarray(values), dst, bound.get("dtype") or dtype_of(bound["data"]),
                 "the result of nki.isa.scalar_tensor_tensor")


def _affine(shape: tuple[int, ...], pattern: Any, offset: int, channel_multiplier: int, what: str) -> np.ndarray:
    """offset + partition * channel_multiplier + sum(index_i * step_i) over the free `pattern`
    ([[step, count], ...]), laid out in the free dimensions of `shape` (the iota / affine_select pseudo code)."""
    pairs = [(int(step), int(count)) for step, count in pattern]
    free = int(np.prod(shape[1:]))
    if int(np.prod([c for _, c in pairs])) != free:
        raise ValueError(f"{what}: pattern {pairs} spans {int(np.prod([c for _, c in pairs]))} elements per "
                         f"partition, dst has {free} at {origin()}")
    grids = np.meshgrid(*(np.arange(c) * st for st, c in pairs), indexing="ij") if pairs else []
    values = int(offset) + sum((g for g in grids), np.zeros([c for _, c in pairs], dtype=np.int64))
    per_partition = values.reshape(1, -1)
    channels = np.arange(shape[0]).reshape(-1, 1) * int(channel_multiplier)
    return (per_partition + channels).reshape(shape)


def iota(*args: Any, **kwargs: Any) -> None:
    """Fill dst with offset + partition * channel_multiplier + the free pattern's affine index (GpSimd)."""
    bound = _bound(args, kwargs, ("dst", "pattern", "offset", "channel_multiplier"))
    dst = bound["dst"]
    if not isinstance(dst, Operand):
        raise unsupported("nki.isa.iota without dst= (the older expression form)")
    if dst.buffer != "sbuf":
        raise NkiRuleError(f"nki.isa.iota writes to SBUF, but dst '{dst.name}' is in {dst.buffer.upper()} at "
                           f"{origin()}")
    values = _affine(tuple(dst.shape), bound["pattern"], bound.get("offset", 0),
                     bound.get("channel_multiplier", 0), "nki.isa.iota")
    cost.charge("iota", tuple(dst.shape))
    _write(dst, values, "nki.isa.iota")


def affine_select(*args: Any, **kwargs: Any) -> None:
    """dst = on_true_tile where cmp_op(affine value, 0), else on_false_value (the affine value as in iota)."""
    bound = _bound(args, kwargs, ("dst", "pattern", "offset", "channel_multiplier", "on_true_tile", "on_false_value",
                                  "cmp_op"))
    dst = bound["dst"]
    affine = _affine(tuple(dst.shape), bound["pattern"], bound.get("offset", 0), bound.get("channel_multiplier", 0),
                     "nki.isa.affine_select")
    predicate = _fn(bound.get("cmp_op", nl.equal), "np_fn")(affine, 0) != 0
    on_true = values_of(bound["on_true_tile"]).astype(np.float32)
    cost.charge("affine_select", on_true.shape)
    _write(dst, np.where(predicate, on_true, np.float32(bound["on_false_value"])), "nki.isa.affine_select")


def max8(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """The 8 largest values of each partition, in descending order (Vector Engine)."""
    dst, bound = _split(args, kwargs, ("src",), 1)
    values = values_of(bound["src"]).astype(np.float32)
    flat = values.reshape(values.shape[0], -1)
    if not 8 <= flat.shape[1] <= 16384:
        raise NkiRuleError(f"nki.isa.max8 reads 8 to 16384 elements per partition, got {flat.shape[1]} at "
                           f"{origin()}")
    cost.charge("max8", flat.shape)
    top = -np.sort(-flat, axis=1)[:, :8]
    return _emit(top, dst, bound.get("dtype") or dtype_of(bound["src"]), "the result of nki.isa.max8")


def nc_find_index8(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """Per partition, the index of the first occurrence in data of each of the 8 vals; a value absent from
    data gives the all-ones sentinel of dst's dtype (uint32 by default)."""
    dst, bound = _split(args, kwargs, ("data", "vals"), 2)
    data = values_of(bound["data"]).astype(np.float32)
    flat = data.reshape(data.shape[0], -1)
    vals = values_of(bound["vals"]).astype(np.float32).reshape(data.shape[0], -1)
    if vals.shape[1] != 8:
        raise ValueError(f"nki.isa.nc_find_index8: vals has {vals.shape[1]} elements per partition, not 8, at "
                         f"{origin()}")
    if not 8 <= flat.shape[1] <= 16384:
        raise NkiRuleError(f"nki.isa.nc_find_index8 reads 8 to 16384 elements per partition, got {flat.shape[1]} "
                           f"at {origin()}")
    cost.charge("nc_find_index8", flat.shape)
    out = as_dtype(bound.get("dtype") or (dst.dtype if dst is not None else nl.uint32))
    sentinel = np.iinfo(out.storage).max
    hits = flat[:, :, None] == vals[:, None, :]
    found = hits.any(axis=1)
    index = np.where(found, hits.argmax(axis=1), sentinel)
    return _emit(index, dst, out, "the result of nki.isa.nc_find_index8")


def dma_transpose(*args: Any, **kwargs: Any) -> None:
    """Copy src into dst with its dimensions reversed (a 2-D transpose done by the DMA engines)."""
    bound = _bound(args, kwargs, ("dst", "src", "axes"))
    dst, src = bound["dst"], bound["src"]
    values = src.read() if isinstance(src, Operand) else np.asarray(src)
    axes = bound.get("axes")
    moved = np.transpose(values, axes) if axes is not None else values.T
    cost.charge_dma(moved.size * dst.dtype.itemsize, "dma_transpose")
    if moved.size != int(np.prod(dst.shape)):
        raise ValueError(f"nki.isa.dma_transpose: src of shape {values.shape} does not fit dst '{dst.name}' of "
                         f"shape {tuple(dst.shape)} at {origin()}")
    dst.write(moved.reshape(dst.shape))


def tensor_scalar_reduce(*args: Any, **kwargs: Any) -> NkiTensor | None:
    """data op0 operand0 (as tensor_scalar), and its reduction along the free axes into reduce_res ([P, 1])."""
    dst, bound = _split(args, kwargs, ("data", "op0", "operand0", "reduce_op", "reduce_res", "reverse0"), 1)
    if bound.get("reduce_cmd", reduce_cmd.reset_reduce) != reduce_cmd.reset_reduce or bound.get("reduce_init") is not None:
        raise unsupported("nki.isa.tensor_scalar_reduce accumulating across instructions (reduce_cmd / reduce_init)")
    values = values_of(bound["data"]).astype(np.float32)
    cost.charge("tensor_scalar_reduce", values.shape)
    operand, fn = _scalar_or_tile(bound["operand0"], values.ndim), _fn(bound["op0"], "np_fn")
    with np.errstate(all="ignore"):
        values = np.asarray(fn(operand, values) if bound.get("reverse0") else fn(values, operand))
    _reduce_into(bound["reduce_res"], values, bound["reduce_op"], (nl.add, nl.multiply, nl.max, nl.min, nl.maximum,
                                                                   nl.minimum), "nki.isa.tensor_scalar_reduce")
    return _emit(values, dst, bound.get("dtype") or dtype_of(bound["data"]), "the result of nki.isa.tensor_scalar_reduce")


from neuronkit.nki.isa_extra import (  # noqa: E402, F401 - re-exported
    bn_aggr,
    bn_stats,
    nc_match_replace8,
    nc_stream_shuffle,
    range_select,
    tensor_copy_predicated,
    tensor_partition_reduce,
)
