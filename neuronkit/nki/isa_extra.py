"""The rarer `nki.isa` instructions NKI-lib's core kernels call: statistics (`bn_stats`, `bn_aggr`), selection
(`range_select`, `tensor_copy_predicated`, `nc_match_replace8`) and data movement across partitions
(`tensor_partition_reduce`, `nc_stream_shuffle`).

Semantics from each instruction's page of the NKI ISA reference
(awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.<name>.html); `neuronkit.nki.isa`
re-exports them. Arithmetic is float32, as on the engines."""

from __future__ import annotations

from typing import Any

import numpy as np

from neuronkit.nki import context, cost
from neuronkit.nki import language as nl
from neuronkit.nki.errors import NkiRuleError, unsupported
from neuronkit.nki.isa_constants import reduce_cmd
from neuronkit.nki.isa_operands import bound as _bound
from neuronkit.nki.isa_operands import op_function as _fn
from neuronkit.nki.isa_operands import write as _write
from neuronkit.nki.tensors import Operand, origin, values_of, with_mask

FP32_MIN = float(np.finfo(np.float32).min)  # nki.isa.fp32.min, range_select's fill value
QUADRANT = 32  # partitions a stream shuffle permutes within (nc_stream_shuffle)
SKIP = 255  # a shuffle_mask entry that leaves its destination partition unmodified


def _per_partition(values: np.ndarray) -> np.ndarray:
    """A tile as [partitions, elements per partition] (an instruction streams each partition's elements)."""
    return values.reshape(values.shape[0], -1) if values.ndim else values.reshape(1, 1)


def bn_stats(*args: Any, **kwargs: Any) -> None:
    """Per partition, (count, mean, variance·count) of the even-indexed elements, then of the odd-indexed ones:
    6 values (Vector Engine). At most `nl.tile_size.bn_stats_fmax` (512) elements per partition."""
    bound = _bound(args, kwargs, ("dst", "data"))
    values = _per_partition(values_of(bound["data"]).astype(np.float32))
    fmax = context.current().core.bn_stats_fmax
    if values.shape[1] > fmax:
        raise NkiRuleError(f"nki.isa.bn_stats reads at most {fmax} elements per partition "
                           f"(nl.tile_size.bn_stats_fmax), got {values.shape[1]} at {origin()}: call it per "
                           f"{fmax}-element tile and aggregate the results with one nki.isa.bn_aggr.")
    cost.charge("bn_stats", values.shape)
    stats = [_moments(values[:, start::2]) for start in (0, 1)]
    _write(bound["dst"], np.concatenate(stats, axis=1), "nki.isa.bn_stats")


def _moments(values: np.ndarray) -> np.ndarray:
    """[P, 3]: count, mean and sum of squared deviations (variance·count) of each row."""
    count = values.shape[1]
    mean = values.mean(axis=1) if count else np.zeros(values.shape[0], np.float32)
    m2 = ((values - mean[:, None]) ** 2).sum(axis=1)
    return np.stack([np.full(values.shape[0], count, np.float32), mean, m2], axis=1)


def bn_aggr(*args: Any, **kwargs: Any) -> None:
    """Per partition, the mean and variance of all the elements the (count, mean, variance·count) triples of
    one or more `bn_stats` results describe: 2 values (Vector Engine)."""
    bound = _bound(args, kwargs, ("dst", "data"))
    values = _per_partition(values_of(bound["data"]).astype(np.float32))
    if values.shape[1] % 3:
        raise ValueError(f"nki.isa.bn_aggr reads (count, mean, variance·count) triples, but data has "
                         f"{values.shape[1]} elements per partition at {origin()}")
    cost.charge("bn_aggr", values.shape)
    count, mean, m2 = (values[:, k::3] for k in range(3))
    total = count.sum(axis=1)
    with np.errstate(all="ignore"):
        grand = np.where(total > 0, (count * mean).sum(axis=1) / total, 0.0)
        spread = (m2 + count * (mean - grand[:, None]) ** 2).sum(axis=1)
        variance = np.where(total > 0, spread / total, 0.0)
    _write(bound["dst"], np.stack([grand, variance], axis=1), "nki.isa.bn_aggr")


def range_select(*args: Any, **kwargs: Any) -> None:
    """`on_true_tile` where comp_op0(index, bound0) and comp_op1(index, bound1), else `on_false_value`, with
    index = range_start + the element's position in its partition and one bound per partition; the max of
    each partition of the result into `reduce_res` (Vector Engine's accumulator registers: `reduce_cmd`
    `reset_reduce` starts them, `reduce` goes on from them)."""
    bound = _bound(args, kwargs, ("dst",))
    on_true = values_of(bound["on_true_tile"]).astype(np.float32)
    rows = _per_partition(on_true)
    cost.charge("range_select", rows.shape)
    index = float(bound.get("range_start", 0)) + np.arange(rows.shape[1], dtype=np.float32)[None, :]
    keep = np.ones(rows.shape, dtype=bool)
    for i in ("0", "1"):
        limit = values_of(bound[f"bound{i}"]).astype(np.float32).reshape(rows.shape[0], -1)[:, :1]
        keep &= _fn(bound[f"comp_op{i}"], "np_fn")(index, limit) != 0
    fill = float(bound.get("on_false_value", FP32_MIN))
    selected = np.where(keep, rows, np.float32(fill))
    _write(bound["dst"], selected.reshape(on_true.shape), "nki.isa.range_select")
    command = bound.get("reduce_cmd", reduce_cmd.idle)
    if bound.get("reduce_res") is None and command == reduce_cmd.idle:
        return
    reducer = bound.get("reduce_op", np.max)
    if reducer not in (np.max, np.amax, nl.max, nl.maximum):
        raise NkiRuleError(f"nki.isa.range_select reduces with max only, got {getattr(reducer, '__name__', reducer)} "
                           f"at {origin()}")
    reduced = selected.max(axis=1)
    registers = context.current().vector_registers
    if command == reduce_cmd.reduce:
        reduced = np.maximum(registers[:rows.shape[0]], reduced)
    if command != reduce_cmd.idle:
        registers[:rows.shape[0]] = reduced
    if bound.get("reduce_res") is not None:
        res = bound["reduce_res"]
        _write(res, reduced.reshape(res.shape if int(np.prod(res.shape)) == reduced.size else (-1, 1)),
               "nki.isa.range_select reduce_res")


def tensor_copy_predicated(*args: Any, **kwargs: Any) -> None:
    """Copy `src` (a tile or a scalar) into `dst` where `predicate` is nonzero (zero with `reverse_pred`);
    the other elements of `dst` keep their values (Vector Engine)."""
    bound = _bound(args, kwargs, ("dst", "src", "predicate"))
    dst, src, predicate = bound["dst"], bound["src"], bound["predicate"]
    shape = tuple(dst.shape)
    condition = (values_of(predicate) != 0).reshape(shape)
    if bound.get("reverse_pred"):
        condition = ~condition
    values = values_of(src).reshape(shape) if isinstance(src, Operand) else np.float32(src)
    both_sbuf = all(getattr(t, "buffer", "sbuf") == "sbuf" for t in (src, predicate))
    cost.charge("tensor_copy_predicated_sbuf" if both_sbuf else "tensor_copy_predicated", shape)
    with_mask(dst, condition).write(np.broadcast_to(values, shape))


def nc_match_replace8(*args: Any, **kwargs: Any) -> None:
    """Per partition, replace the first occurrence in `data` of each of the 8 `vals` by `imm`, into `dst`;
    their indices into `dst_idx` when given (Vector Engine)."""
    bound = _bound(args, kwargs, ("dst",))
    data = values_of(bound["data"]).astype(np.float32)
    rows = _per_partition(data).copy()
    vals = values_of(bound["vals"]).astype(np.float32).reshape(rows.shape[0], -1)
    if vals.shape[1] != 8:
        raise ValueError(f"nki.isa.nc_match_replace8: vals has {vals.shape[1]} elements per partition, not 8, at "
                         f"{origin()}")
    if rows.shape[1] > 16384:
        raise NkiRuleError(f"nki.isa.nc_match_replace8 reads at most 16384 elements per partition, got "
                           f"{rows.shape[1]} at {origin()}")
    cost.charge("nc_match_replace8", rows.shape)
    indices = np.zeros(vals.shape, dtype=np.int64)
    for p in range(rows.shape[0]):
        for j, val in enumerate(vals[p]):
            hits = np.flatnonzero(rows[p] == val)
            if hits.size:
                indices[p, j] = hits[0]
                rows[p, hits[0]] = np.float32(bound["imm"])
    _write(bound["dst"], rows.reshape(data.shape), "nki.isa.nc_match_replace8")
    if bound.get("dst_idx") is not None:
        _write(bound["dst_idx"], indices.reshape(tuple(bound["dst_idx"].shape)) if indices.size ==
               int(np.prod(bound["dst_idx"].shape)) else indices, "nki.isa.nc_match_replace8 dst_idx")


def tensor_partition_reduce(*args: Any, **kwargs: Any) -> None:
    """Reduce `data` across its partitions with `op` (add, max, ...) into a one-partition `dst` (GpSimd
    Engine)."""
    dst = kwargs.pop("dst", None)
    if dst is None and args and isinstance(args[0], Operand):
        dst, args = args[0], args[1:]
    bound = _bound(args, kwargs, ("op", "data"))
    values = values_of(bound["data"]).astype(np.float32)
    cost.charge("tensor_partition_reduce", values.shape)
    op = bound["op"]
    reducer = op.reduce if isinstance(op, np.ufunc) else getattr(op, "reduce_fn", None)
    if reducer is None:
        raise unsupported(f"op={getattr(op, '__name__', op)!r} in nki.isa.tensor_partition_reduce")
    _write(dst, reducer(values, axis=0, keepdims=True), "nki.isa.tensor_partition_reduce")


def nc_stream_shuffle(*args: Any, **kwargs: Any) -> None:
    """Within each quadrant of 32 partitions, destination partition i takes source partition shuffle_mask[i]
    of the same quadrant (255: left unmodified); the same mask for every quadrant (Vector Engine)."""
    bound = _bound(args, kwargs, ("src", "dst", "shuffle_mask"))
    src, dst, mask = bound["src"], bound["dst"], [int(m) for m in bound["shuffle_mask"]]
    if len(mask) != QUADRANT:
        raise ValueError(f"nki.isa.nc_stream_shuffle: shuffle_mask has {len(mask)} entries, not {QUADRANT}, at "
                         f"{origin()}")
    source = _per_partition(values_of(src))
    rows = (int(dst.shape[0]), int(np.prod(dst.shape[1:])) if len(dst.shape) > 1 else 1)
    if source.shape[1] != rows[1]:
        raise ValueError(f"nki.isa.nc_stream_shuffle: src has {source.shape[1]} elements per partition, dst "
                         f"'{dst.name}' {rows[1]}, at {origin()}: they must match")
    cost.charge("nc_stream_shuffle", source.shape)
    result = np.zeros(rows, dtype=np.float32)
    keep = np.zeros(rows, dtype=bool)
    for p in range(rows[0]):
        quadrant, lane = divmod(p, QUADRANT)
        if mask[lane] == SKIP:
            continue
        row = quadrant * QUADRANT + mask[lane]
        if row >= source.shape[0]:
            raise NkiRuleError(f"nki.isa.nc_stream_shuffle: destination partition {p} takes source partition "
                               f"{row}, but src has {source.shape[0]} at {origin()}")
        result[p], keep[p] = source[row], True
    with_mask(dst, keep.reshape(tuple(dst.shape))).write(result.reshape(tuple(dst.shape)))
