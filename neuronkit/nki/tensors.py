"""Tensors in HBM, SBUF and PSUM, index tiles, and the access rules the NeuronCore enforces.

An `NkiTensor` holds its values in a NumPy array (NaN until written, as the Neuron SDK's simulator shows
never-written memory) and a mask of the elements written so far. Indexing with integers and slices gives
a view sharing both; indexing with index tiles (`nl.arange`, `nl.mgrid`) or under a mask gives an
`Access`, which gathers on read and scatters on write. Every index is checked against the tensor's
bounds (NumPy would silently clip a slice or wrap a negative index; the device faults)."""

from __future__ import annotations

import math
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from neuronkit.nki import context
from neuronkit.nki.dtypes import DType, as_dtype
from neuronkit.nki.errors import NkiRuleError, NkiUninitializedReadWarning, unsupported

ON_CHIP = ("sbuf", "psum")
_PACKAGE_DIR = os.path.dirname(__file__)


class ParDim(int):
    """`nl.par_dim(n)`: marks which dimension of an on-chip tensor is the partition dimension."""


class DynSlice:
    """`nl.ds(start, size)`: the slice start:start+size."""

    def __init__(self, start: int, size: int) -> None:
        self.start, self.size = int(start), int(size)

    def as_slice(self) -> slice:
        return slice(self.start, self.start + self.size)


def origin() -> str:
    """Where in the user's kernel the current NKI call was made ("line 12 of kernel.py")."""
    frame = sys._getframe(1)
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == _PACKAGE_DIR:
        frame = frame.f_back
    if frame is None:
        return "an unknown line"
    return f"line {frame.f_lineno} of {os.path.basename(frame.f_code.co_filename)}"


class Operand:
    """What element-wise arithmetic works on: tensors and accesses (`a_tile + b_tile`, `-x`, `x * 2`)."""

    __array_ufunc__ = None  # `ndarray <op> tile` defers to the tile's reflected operator
    _ops: ClassVar[dict[str, Any]] = {}  # filled by nki.language: operator name -> element-wise function

    shape: tuple[int, ...]
    dtype: DType
    buffer: str
    name: str

    def read(self, where: Any = None) -> np.ndarray:
        raise NotImplementedError

    def _bin(self, op: str, other: Any, reflected: bool = False) -> Any:
        fn = self._ops[op]
        return fn(other, self) if reflected else fn(self, other)

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("subtract", o)
    def __rsub__(self, o): return self._bin("subtract", o, True)
    def __mul__(self, o): return self._bin("multiply", o)
    def __rmul__(self, o): return self._bin("multiply", o, True)
    def __truediv__(self, o): return self._bin("divide", o)
    def __rtruediv__(self, o): return self._bin("divide", o, True)
    def __pow__(self, o): return self._bin("power", o)
    def __lt__(self, o): return self._bin("less", o)
    def __le__(self, o): return self._bin("less_equal", o)
    def __gt__(self, o): return self._bin("greater", o)
    def __ge__(self, o): return self._bin("greater_equal", o)
    def broadcast_to(self, shape: Any) -> Any:
        return self._ops["broadcast_to"](self, shape)

    def __neg__(self): return self._ops["negative"](self)
    def __abs__(self): return self._ops["abs"](self)

    __hash__ = object.__hash__


@dataclass(frozen=True)
class Placement:
    """Where a tensor placed with `address=` lies in its memory's shared store (`context.Launch.store`): its
    first partition, its first element in each partition, its elements per partition and partition count,
    and the store's elements per partition."""

    partition: int
    element: int
    free: int
    partitions: int
    row: int


class NkiTensor(Operand):
    """A tensor (or a view of one) in HBM, SBUF or PSUM."""

    def __init__(self, data: np.ndarray, written: np.ndarray, dtype: DType, buffer: str, name: str,
                 where: str = "", stored: np.ndarray | None = None, placement: Placement | None = None,
                 accumulated: np.ndarray | None = None) -> None:
        self.data = data
        self.written = written
        self.stored = stored  # kernel inputs only: which elements the kernel wrote
        self.placement = placement  # placed with address=: a view of the memory's shared store
        # elements a matmul into this tensor accumulates onto: those written, except for a placed tensor,
        # whose memory other tensors also write: there those its own writes reached (nki.isa.nc_matmul)
        self.accumulated = written if accumulated is None else accumulated
        self.dtype = dtype
        self.buffer = buffer
        self.name = name
        self.where = where

    def __repr__(self) -> str:
        return f"<{self.buffer} tensor {self.name} {self.shape} {self.dtype!r}>"

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def ndim(self) -> int:
        return self.data.ndim

    def describe(self) -> str:
        at = f" (allocated at {self.where})" if self.where else ""
        return f"{self.buffer} tensor '{self.name}' of shape {self.shape}{at}"

    @property
    def size(self) -> int:
        return int(self.data.size)

    def __getitem__(self, index: Any) -> NkiTensor | Access:
        return index_tensor(self, index)

    def reshape(self, shape: Any) -> NkiTensor:
        """The same elements under another shape, sharing memory (a view, as `NkiTensor.reshape` in NKI)."""
        dims = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        try:
            data = self.data.reshape(dims, copy=False)
        except ValueError:
            raise NkiRuleError(f"reshape of {self.describe()} to {dims} at {origin()}: "
                               f"{'the sizes differ' if math.prod(dims) != self.size else 'the view is not contiguous'}"
                               "; a reshape is a view of the same memory.") from None
        return self._derived(data, self.written.reshape(dims, copy=False),
                             None if self.stored is None else self.stored.reshape(dims, copy=False),
                             None if self.placement is None else self.accumulated.reshape(dims, copy=False))

    def ap(self, pattern: Any, offset: int = 0, dtype: Any = None, **indirect: Any) -> NkiTensor:
        """An access pattern over this tensor's memory: `pattern` is [[stride, count], ...] in elements of the
        tensor laid out row-major (the first pair steps partitions on chip), starting `offset` elements in
        (the NKI access-pattern deep dive). A stride of 0 repeats elements (broadcast)."""
        if any(v is not None for v in indirect.values()):
            raise unsupported("NkiTensor.ap with indirect offsets (scalar_offset / vector_offset)")
        if dtype is not None and as_dtype(dtype) != self.dtype:
            raise unsupported(f"NkiTensor.ap reinterpreting {self.dtype!r} as {as_dtype(dtype)!r}")
        pairs = [(int(stride), int(count)) for stride, count in pattern]
        root = _root(self.data)
        start = (self.data.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // root.itemsize
        place = self.placement
        if place is not None:  # count in the placed tensor's own row-major layout, not the shared store's
            partition, element = divmod(start, place.row)
            start = (partition - place.partition) * place.free + element - place.element
        size = root.size if place is None else place.partitions * place.free
        first = start + int(offset)
        last = first + sum((c - 1) * st for st, c in pairs if c > 0)
        if first < 0 or last >= size or min(st for st, _ in pairs) < 0:
            raise NkiRuleError(f"access pattern {pairs} at offset {offset} on {self.describe()} reaches element "
                               f"{last} of {size} at {origin()}: it runs past the tensor's memory.")
        shape = tuple(c for _, c in pairs)
        accumulated = None
        if place is not None:  # its own mask is laid out as the tensor; its memory is the store's
            accumulated = _strided(self.accumulated, first, pairs, shape)
            first, pairs = _in_store(place, first, pairs, self)
        views = [_strided(a, first, pairs, shape) if a is not None else None
                 for a in (self.data, self.written, self.stored)]
        return self._derived(*views, accumulated)

    def _derived(self, data: np.ndarray, written: np.ndarray, stored: np.ndarray | None,
                 accumulated: np.ndarray | None = None) -> NkiTensor:
        return NkiTensor(data, written, self.dtype, self.buffer, self.name, self.where, stored, self.placement,
                         accumulated)

    def __setitem__(self, index: Any, value: Any) -> None:
        target = index_tensor(self, index)
        if isinstance(value, NkiTensor) and not value.written.all() and value.written.shape == tuple(target.shape):
            # the result of a masked instruction (`tile[...] = nl.multiply(a, b, mask=m)`, the NKI tutorials'
            # pattern): the instruction writes its destination under the mask, so only those elements change
            target.write(value.data, value.written)
            return
        target.write(value.read() if isinstance(value, Operand) else value)

    def read(self, where: Any = None) -> np.ndarray:
        """The values; a warning if any element read (within `where`, a mask) was never written."""
        unwritten = ~self.written if where is None else ~self.written & np.asarray(where, dtype=bool)
        if unwritten.any():
            warn_unwritten(self, int(unwritten.sum()))
        return self.data.copy()

    def write(self, values: Any, mask: np.ndarray | None = None) -> None:
        values = fit(values, self.shape)
        keep = ... if mask is None else np.broadcast_to(mask, self.shape)  # `...`: every element
        self.data[keep] = self.dtype.round(values[keep])
        self.written[keep] = True
        if self.stored is not None:
            self.stored[keep] = True




def _in_store(place: Placement, first: int, pairs: list[tuple[int, int]],
              tensor: NkiTensor) -> tuple[int, list[tuple[int, int]]]:
    """An access pattern over a placed tensor's own layout, as element offset and strides in the shared store:
    a stride of whole partitions steps the store's rows; a smaller one stays within a partition."""
    partition, element = divmod(first, place.free)
    moved = []
    for stride, count in pairs:
        if stride % place.free == 0:
            moved.append((stride // place.free * place.row, count))
        elif element + (count - 1) * stride < place.free:
            moved.append((stride, count))
        else:
            raise unsupported(f"an access pattern on {tensor.describe()} (placed with address=) whose stride "
                              f"{stride} crosses partitions without stepping whole ones")
    return (place.partition + partition) * place.row + place.element + element, moved


def _root(a: np.ndarray) -> np.ndarray:
    """The array `a` views (through slicing, reshapes and access patterns, whose NumPy view holds its
    source one level further down)."""
    while a.base is not None:
        base = a.base if isinstance(a.base, np.ndarray) else getattr(a.base, "base", None)
        if not isinstance(base, np.ndarray):
            break
        a = base
    return a


def _strided(a: np.ndarray, first: int, pairs: list[tuple[int, int]], shape: tuple[int, ...]) -> np.ndarray:
    """A view of `a`'s root array: element `first` on, stepping `pairs` ([stride, count] in elements)."""
    root = _root(a).reshape(-1)
    return np.lib.stride_tricks.as_strided(root[first:], shape, tuple(st * root.itemsize for st, _ in pairs))


class Access(Operand):
    """Elements of a tensor picked by index tiles (and optionally a mask): gathered on read, scattered
    on write."""

    def __init__(self, tensor: NkiTensor, indices: tuple[np.ndarray, ...], mask: np.ndarray | None) -> None:
        self.tensor = tensor
        self.shape = tuple(np.broadcast_shapes(*(i.shape for i in indices)))
        self.valid = None if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), self.shape)
        self.indices = tuple(np.broadcast_to(i, self.shape) for i in indices)
        self.dtype = tensor.dtype
        self.buffer = tensor.buffer
        self.name = tensor.name

    def masked(self, mask: Any) -> Access:
        """The same elements, restricted to where `mask` (broadcast to the tile's shape) is true."""
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), self.shape)
        return Access(self.tensor, self.indices, mask if self.valid is None else mask & self.valid)

    def _picked(self) -> tuple[np.ndarray, ...]:
        _check_bounds(self.tensor, self.indices, self.valid)
        if self.valid is None:
            return self.indices
        return tuple(i[self.valid] for i in self.indices)

    def read(self, where: Any = None) -> np.ndarray:
        if where is not None:
            return self.masked(where).read()
        picked = self._picked()
        unwritten = int((~self.tensor.written[picked]).sum())
        if unwritten:
            warn_unwritten(self.tensor, unwritten)
        values = np.full(self.shape, np.nan if self.dtype.is_float else 0, dtype=self.dtype.storage)
        values[... if self.valid is None else self.valid] = self.tensor.data[picked]
        return values

    def write(self, values: Any, mask: np.ndarray | None = None) -> None:
        if mask is not None:
            self.masked(mask).write(values)
            return
        values = fit(values, self.shape)
        picked = self._picked()
        if self.valid is not None:
            values = values[self.valid]
        self.tensor.data[picked] = self.tensor.dtype.round(values)
        self.tensor.written[picked] = True
        if self.tensor.stored is not None:
            self.tensor.stored[picked] = True


def fit(values: Any, shape: tuple[int, ...]) -> np.ndarray:
    """`values` broadcast to `shape`; a [P] vector fills [P, ...] one value per partition, as in NKI."""
    values = np.asarray(values)
    if values.ndim == 1 and len(shape) > 1 and values.shape[0] == shape[0]:
        values = values.reshape((shape[0],) + (1,) * (len(shape) - 1))
    try:
        return np.broadcast_to(values, shape)
    except ValueError:
        raise ValueError(f"a value of shape {values.shape} does not fit a tile of shape {shape} at {origin()}") from None


def warn_unwritten(tensor: NkiTensor, count: int) -> None:
    """Warn once per tensor per launch that the kernel read elements it never wrote."""
    launch = context.current()
    root = tensor.data.base if tensor.data.base is not None else tensor.data
    key = (id(root), tensor.name)  # placed tensors share one root
    if launch.abstract or key in launch.warned:
        return
    launch.warned[key] = root  # held, so no other array reuses the id during the launch
    warnings.warn(
        f"kernel {launch.kernel_name} read {count} element(s) of {tensor.describe()} that were never "
        f"written, at {origin()}: they read as NaN, as in the Neuron SDK's simulator (on a device: whatever "
        "the memory held). Write (load, memset or compute into) the tile before reading it.",
        NkiUninitializedReadWarning, stacklevel=3)


# ---------------------------------------------------------------------------------------------------
# Allocation


def allocate(shape: Any, dtype: Any, buffer: str, name: str | None = None, what: str = "a tile",
             address: Any = None) -> NkiTensor:
    """A new tensor of `shape` in `buffer`, every element unwritten; on-chip tensors are checked against
    the partition limit and the memory left. An on-chip tensor placed by the kernel at `address`
    (partition, byte offset per partition) must fit the memory from there; it is not added to the live
    tiles, since kernels place several tensors at one address to reuse it, and it shares its elements with
    every tensor of the same dtype placed over the same bytes (`_placed`)."""
    launch = context.current()
    dtype = as_dtype(dtype)
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in dims):
        raise TypeError(f"a tensor shape is a tuple of non-negative integers, got {shape!r}")
    dims_int = tuple(int(d) for d in dims)
    where = origin()
    if buffer == "shared_hbm":
        return _shared_hbm(launch, dims_int, dtype, name, where)
    if buffer in ("hbm", "private_hbm"):
        return _fresh(dims_int, dtype, "hbm", name or launch.next_name("hbm"), where)
    if buffer not in ON_CHIP:
        raise unsupported(f"nki.language.ndarray(buffer={buffer!r})")
    par = next((i for i, d in enumerate(dims) if isinstance(d, ParDim)), 0)
    name = name or launch.next_name(buffer)
    if not dims_int:
        return _fresh(dims_int, dtype, buffer, name, where)
    check_partition(dims_int[par], f"{what} in {buffer.upper()} of shape {dims_int}", where)
    per_partition = math.prod(d for i, d in enumerate(dims_int) if i != par) * dtype.itemsize
    if address is None:
        tensor = _fresh(dims_int, dtype, buffer, name, where)
        launch.hold(tensor, buffer, per_partition, f"{what} of shape {dims_int} {dtype!r} at {where}")
        return tensor
    _check_placed(launch, buffer, dims_int[par], per_partition, address, f"{what} of shape {dims_int} at {where}")
    if par != 0 or int(address[1]) % dtype.itemsize:
        raise unsupported(f"placing {what} of shape {dims_int} {dtype!r} at address {tuple(address)} (neuronkit "
                          "places tensors whose first dimension is the partition dimension, at a byte offset that "
                          "is a multiple of the dtype's size)")
    return _placed(launch, dims_int, dtype, buffer, name, where, address)


def _placed(launch: context.Launch, dims: tuple[int, ...], dtype: DType, buffer: str, name: str, where: str,
            address: Any) -> NkiTensor:
    """A tensor placed at `address`: a view of the launch's store for (buffer, dtype), so tensors of that
    dtype placed over the same bytes share their elements, as on the device. Its never-written elements
    read NaN. Tensors of different dtypes at one address do not share (docs/nki.md, known differences)."""
    first, offset = (int(a) for a in address)
    data, written = launch.store(buffer, dtype)
    start, free = offset // dtype.itemsize, math.prod(dims[1:])
    region = (slice(first, first + dims[0]), slice(start, start + free))
    view, seen = data[region].reshape(dims), written[region].reshape(dims)
    if dtype.is_float:
        view[~seen] = np.nan
    return NkiTensor(view, seen, dtype, buffer, name, where,
                     placement=Placement(first, start, free, dims[0], data.shape[1]),
                     accumulated=np.zeros(dims, dtype=bool))


def _check_placed(launch: context.Launch, buffer: str, partitions: int, per_partition: int, address: Any,
                  what: str) -> None:
    """Rule: a tensor placed at (partition, byte offset) lies inside the buffer's partitions and bytes."""
    first, offset = (int(a) for a in address)
    limit = launch.capacity(buffer)
    if first < 0 or offset < 0 or first + partitions > launch.core.pmax or offset + per_partition > limit:
        raise NkiRuleError(
            f"{what} placed at address ({first}, {offset}) runs past {buffer.upper()}: it needs partitions "
            f"{first}..{first + partitions - 1} of {launch.core.pmax} and bytes {offset}..{offset + per_partition - 1} "
            f"of {limit} per partition on one {launch.core.name} ({launch.core.target}).")


def check_partition(size: int, what: str, where: str | None = None) -> None:
    """Rule: an on-chip tile spans at most `pmax` (128) partitions."""
    pmax = context.current().core.pmax
    if size > pmax:
        raise NkiRuleError(
            f"partition dimension too large: {what} spans {size} partitions, but SBUF and PSUM have "
            f"{pmax} (nl.tile_size.pmax), at {where or origin()}. The first dimension of an on-chip tile is "
            f"its partition dimension: split it into tiles of at most {pmax} rows (loop with nl.affine_range "
            f"over tiles of nl.tile_size.pmax rows).")


def _fresh(dims: tuple[int, ...], dtype: DType, buffer: str, name: str, where: str) -> NkiTensor:
    fill = np.nan if dtype.is_float else 0
    return NkiTensor(np.full(dims, fill, dtype=dtype.storage), np.zeros(dims, dtype=bool), dtype, buffer, name,
                     where)


def _shared_hbm(launch: context.Launch, dims: tuple[int, ...], dtype: DType, name: str | None,
                where: str) -> NkiTensor:
    """Every program of an SPMD launch allocating its k-th shared HBM tensor gets the same tensor."""
    k = launch.shared_seen
    launch.shared_seen += 1
    if k < len(launch.shared_hbm):
        tensor = launch.shared_hbm[k]
        if tensor.shape != dims or tensor.dtype != dtype:
            raise NkiRuleError(f"program {launch.program} allocated shared HBM tensor #{k} as {dims} {dtype!r}, "
                               f"but program 0 allocated it as {tensor.shape} {tensor.dtype!r}")
        return tensor
    tensor = _fresh(dims, dtype, "shared_hbm", name or launch.next_name("shared_hbm"), where)
    launch.shared_hbm.append(tensor)
    return tensor


def new_tile(values: np.ndarray, dtype: DType, what: str, buffer: str = "sbuf",
             mask: np.ndarray | None = None) -> NkiTensor:
    """An on-chip tile holding `values` (the result of a load or of a computation)."""
    tile = allocate(values.shape, dtype, buffer, what=what)
    tile.write(values, mask)
    return tile


# ---------------------------------------------------------------------------------------------------
# Indexing


def index_tensor(tensor: NkiTensor, index: Any) -> NkiTensor | Access:
    """`tensor[index]`: a view for integers and slices, an `Access` for index tiles."""
    items = _expand(tensor, index)
    if not any(isinstance(i, np.ndarray) for i in items):
        return _view(tensor, items)
    return Access(tensor, _index_arrays(tensor, items), None)


def with_mask(target: NkiTensor | Access, mask: Any) -> NkiTensor | Access:
    """`target` restricted to where `mask` is true (a mask= argument of load, store and friends)."""
    if mask is None:
        return target
    if isinstance(target, NkiTensor):
        target = Access(target, _index_arrays(target, [slice(None)] * target.ndim), None)
    return target.masked(mask)


def _expand(tensor: NkiTensor, index: Any) -> list[Any]:
    items = list(index) if isinstance(index, tuple) else [index]
    if any(i is Ellipsis for i in items):
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (tensor.ndim - len(items) + 1)
    if len(items) > tensor.ndim:
        raise IndexError(f"{len(items)} indices for {tensor.describe()}, which has {tensor.ndim} dimension(s)")
    items += [slice(None)] * (tensor.ndim - len(items))
    out = []
    for item in items:
        if isinstance(item, DynSlice):
            item = item.as_slice()
        elif isinstance(item, Operand):
            raise unsupported("indexing with a tile of values (dynamic indices)")
        elif isinstance(item, (list, tuple)):
            item = np.asarray(item)
        if isinstance(item, np.ndarray):
            if item.ndim == 0:
                item = int(item)
            elif item.dtype.kind not in "iu":
                raise TypeError(f"index tiles hold integers, got {item.dtype}")
        if item is None:
            raise unsupported("indexing with None (new axes) on an NKI tensor")
        out.append(item)
    return out


def _bounds(tensor: NkiTensor, axis: int, item: Any) -> tuple[int, int, int]:
    """(start, stop, step) of an integer or slice index on `axis`, checked against the tensor's bounds."""
    size = tensor.shape[axis]
    if isinstance(item, slice):
        step = 1 if item.step is None else int(item.step)
        start = 0 if item.start is None else int(item.start)
        stop = size if item.stop is None else int(item.stop)
        if step <= 0:
            raise unsupported("slices with a negative or zero step")
        if start < 0 or stop > size or start > stop:
            _out_of_bounds(tensor, axis, f"{start}:{stop}", size)
        return start, stop, step
    i = int(item)
    if not 0 <= i < size:
        _out_of_bounds(tensor, axis, str(i), size)
    return i, i + 1, 1


def _view(tensor: NkiTensor, items: list[Any]) -> NkiTensor:
    idx = []
    for axis, item in enumerate(items):
        start, stop, step = _bounds(tensor, axis, item)
        idx.append(slice(start, stop, step) if isinstance(item, slice) else start)
    idx_t = tuple(idx)
    stored = None if tensor.stored is None else tensor.stored[idx_t]
    accumulated = None if tensor.placement is None else tensor.accumulated[idx_t]
    return tensor._derived(tensor.data[idx_t], tensor.written[idx_t], stored, accumulated)


def _index_arrays(tensor: NkiTensor, items: list[Any]) -> tuple[np.ndarray, ...]:
    """One integer array per axis, broadcastable to the accessed tile's shape."""
    rank = max((i.ndim for i in items if isinstance(i, np.ndarray)), default=len(items))
    if any(isinstance(i, slice) for i in items) and rank != len(items):
        rank = len(items)
        if any(isinstance(i, np.ndarray) and i.ndim != rank for i in items):
            raise unsupported("mixing index tiles and slices whose dimensions do not line up with the tensor's")
    arrays = []
    for axis, item in enumerate(items):
        if isinstance(item, slice):
            start, stop, step = _bounds(tensor, axis, item)
            shape = [1] * rank
            shape[axis] = len(range(start, stop, step))
            arrays.append(np.arange(start, stop, step).reshape(shape))
        else:
            arrays.append(np.asarray(item, dtype=np.int64))
    return tuple(arrays)


def _check_bounds(tensor: NkiTensor, indices: tuple[np.ndarray, ...], valid: np.ndarray | None) -> None:
    for axis, idx in enumerate(indices):
        used = idx if valid is None else idx[valid]
        if used.size == 0:
            continue
        low, high = int(used.min()), int(used.max())
        if low < 0 or high >= tensor.shape[axis]:
            _out_of_bounds(tensor, axis, f"{low}..{high}", tensor.shape[axis])


def _out_of_bounds(tensor: NkiTensor, axis: int, got: str, size: int) -> None:
    raise NkiRuleError(
        f"out-of-bounds access: index {got} on axis {axis} of {tensor.describe()}, whose valid indices are "
        f"0..{size - 1}, at {origin()}. The device does not clip or wrap indices. Guard the last partial "
        "tile with mask=(i < size) or size tiles to divide the tensor.")


def values_of(x: Any, where: Any = None) -> np.ndarray:
    """The values an operand holds, for computation: tiles are read (only the elements under the mask
    `where` count as used), scalars and arrays pass through."""
    if isinstance(x, Operand):
        if x.buffer not in ON_CHIP:
            raise NkiRuleError(
                f"{x.buffer} tensor '{x.name}' used in a computation at {origin()}: NeuronCore engines compute "
                "on SBUF/PSUM tiles only. Load it first: tile = nl.load(tensor[...]).")
        if where is not None:
            where = np.asarray(where, dtype=bool)
            rank = len(x.shape)  # a mask aligns on the partition dimension, as operands do (nl's partition_aligned)
            if where.ndim > rank and all(n == 1 for n in where.shape[rank:]):
                where = where.reshape(where.shape[:rank])
            elif 0 < where.ndim < rank:
                where = where.reshape(where.shape + (1,) * (rank - where.ndim))
            where = np.broadcast_to(where, x.shape)
        return x.read(where)
    return np.asarray(x)


def dtype_of(x: Any) -> DType | None:
    """An operand's NKI dtype, or None for a Python scalar (which takes the other operand's dtype)."""
    if isinstance(x, Operand):
        return x.dtype
    if isinstance(x, np.ndarray) and x.ndim:
        return as_dtype(x.dtype)
    return None
