"""Per-op metrics as Parquet: one row per captured op event, and a per-op summary (docs/profiling.md).

In the spirit of Neuron Explorer's Parquet export (behaviour doc §6), the tables are self-describing
(field metadata) and stable, so a notebook, a report or an agent can analyse bottlenecks from them.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from neuronkit.nki.cost import EngineEstimate
from neuronkit.policy import CPU_FALLBACK, HOST_ROUND_TRIP, NATIVE, load_policy
from neuronkit.profiling.correlate import DeviceOp

EVENTS_NAME = "op_events.parquet"
SUMMARY_NAME = "op_summary.parquet"


def _field(name: str, type_: pa.DataType, doc: str, nullable: bool = False) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


EVENTS_SCHEMA = pa.schema([
    _field("seq", pa.int64(), "order of the op event in the profiled window"),
    _field("name", pa.string(), "ATen op, e.g. aten::mm"),
    _field("overload", pa.string(), "ATen overload, e.g. default, Tensor"),
    _field("classification", pa.string(), "native (ran on the device) or cpu_fallback (ran on the host)"),
    _field("category", pa.string(), "op-support category from neuronkit/data/op_support.toml"),
    _field("fallback", pa.bool_(), "ran on the host through the CPU fallback"),
    _field("device", pa.int32(), "logical NeuronCore index"),
    _field("start_ns", pa.int64(), "start, ns since the profiler trace start"),
    _field("duration_ns", pa.int64(), "measured execution in the simulated kernel (host time for a fallback)"),
    _field("input_shapes", pa.list_(pa.list_(pa.int64())), "shapes of the tensor inputs"),
    _field("input_dtypes", pa.list_(pa.string()), "dtypes of the tensor inputs"),
    _field("module_path", pa.string(), "innermost nn.Module (FQN) when known", nullable=True),
    _field("cache_key", pa.string(), "eager NEFF cache key; null for fallbacks and views", nullable=True),
    _field("cache_hit", pa.bool_(), "the NEFF was already compiled"),
    _field("bytes_in", pa.int64(), "bytes of tensor inputs"),
    _field("bytes_out", pa.int64(), "bytes of tensor outputs"),
    _field("fallback_bytes", pa.int64(), "host<->device bytes a fallback copies (inputs + outputs); 0 if native"),
    _field("host_transfer", pa.string(), "host work inside a native op (op_support.toml [[host_transfer]]): "
           "host_sync (a data-dependent check or .item() waits for the device) or host_round_trip (the kernel "
           "copies its tensors to the host and back); null for none", nullable=True),
    _field("host_bytes", pa.int64(), "host<->device bytes a native op's host round trip copies (inputs + "
           "outputs); 0 otherwise"),
    _field("flops", pa.int64(), "FLOPs of matmul-class ops from shapes; 0 otherwise"),
    _field("est_trn2_ns", pa.float64(), "ESTIMATE: roofline time on one Trainium2 logical NeuronCore"),
    _field("bound", pa.string(), "ESTIMATE: compute or memory, from the roofline"),
    _field("roofline_compute_ns", pa.float64(), "ESTIMATE: FLOPs / peak FLOP/s"),
    _field("roofline_memory_ns", pa.float64(), "ESTIMATE: (bytes_in + bytes_out) / HBM bandwidth"),
    _field("cpu_op_id", pa.int64(), "profiler correlation id (External id) of the launching CPU op", nullable=True),
    _field("cpu_op_us", pa.float64(), "duration of the launching CPU op", nullable=True),
    _field("nki_est_ns", pa.float64(), "ESTIMATE for an NKI kernel launch: engine time from the instructions it "
           "executed (neuronkit/nki/cost.py; max over compute engines + DMA); null for other ops", nullable=True),
    _field("nki_engine_ns", pa.map_(pa.string(), pa.float64()), "ESTIMATE for an NKI kernel launch: busy time per "
           "engine (tensor, vector, scalar, gpsimd, dma); null for other ops", nullable=True),
])

SUMMARY_SCHEMA = pa.schema([
    _field("name", pa.string(), "ATen op"),
    _field("classification", pa.string(), "native or cpu_fallback"),
    _field("category", pa.string(), "op-support category"),
    _field("calls", pa.int64(), "op events in the window"),
    _field("device_time_us", pa.float64(), "total measured device execution (0 for fallbacks)"),
    _field("cpu_time_us", pa.float64(), "total time of the launching CPU ops (includes the simulated execution)"),
    _field("est_trn2_us", pa.float64(), "ESTIMATE: total roofline time on one Trainium2 logical NeuronCore"),
    _field("bound", pa.string(), "ESTIMATE: compute or memory, whichever roofline term dominates in total"),
    _field("flops", pa.int64(), "total FLOPs (matmul-class ops)"),
    _field("bytes_moved", pa.int64(), "total bytes in + out"),
    _field("fallback_bytes", pa.int64(), "total host<->device bytes copied by fallbacks"),
    _field("host_transfers", pa.int64(), "calls with host work inside the native op (a host sync or round trip)"),
    _field("host_bytes", pa.int64(), "total host<->device bytes copied by native ops' host round trips"),
    _field("distinct_neffs", pa.int64(), "distinct NEFF cache keys"),
    _field("nki_est_us", pa.float64(), "ESTIMATE for an NKI kernel: total estimated engine time of its launches "
           "(device_time_us is the interpreter's host time); null for other ops", nullable=True),
])


def events_frame(ops: list[DeviceOp]) -> pd.DataFrame:
    """One row per op event, in EVENTS_SCHEMA's columns."""
    rows = []
    policy = load_policy()
    for op in ops:
        e, est = op.event, op.estimate
        host = None if e.fallback else policy.host_transfer(e.name if e.overload == "default" else f"{e.name}.{e.overload}")
        rows.append({
            "seq": op.seq, "name": e.name, "overload": e.overload,
            "classification": CPU_FALLBACK if e.fallback else NATIVE, "category": e.category,
            "fallback": e.fallback, "device": op.captured.core, "start_ns": op.start_ns, "duration_ns": e.duration_ns,
            "input_shapes": [list(s) for s in e.input_shapes], "input_dtypes": list(e.input_dtypes),
            "module_path": op.captured.module_path, "cache_key": e.cache_key, "cache_hit": e.cache_hit,
            "bytes_in": e.bytes_in, "bytes_out": e.bytes_out,
            "fallback_bytes": e.bytes_in + e.bytes_out if e.fallback else 0,
            "host_transfer": host, "host_bytes": e.bytes_in + e.bytes_out if host == HOST_ROUND_TRIP else 0,
            "flops": est.flops, "est_trn2_ns": est.ns, "bound": est.bound,
            "roofline_compute_ns": est.compute_ns, "roofline_memory_ns": est.memory_ns,
            "cpu_op_id": op.cpu.id if op.cpu else None,
            "cpu_op_us": op.cpu.time_range.elapsed_us() if op.cpu else None,
            **_nki_columns(e.engine_estimate),
        })
    return pd.DataFrame(rows, columns=EVENTS_SCHEMA.names)


def _nki_columns(estimate: EngineEstimate | None) -> dict:
    if estimate is None:
        return {"nki_est_ns": None, "nki_engine_ns": None}
    return {"nki_est_ns": estimate.total_ns, "nki_engine_ns": {**estimate.engine_ns, "dma": estimate.dma_ns}}


def summary_frame(events: pd.DataFrame) -> pd.DataFrame:
    """Per-op aggregates of an events frame, hottest device time first."""
    if events.empty:
        return pd.DataFrame(columns=SUMMARY_SCHEMA.names)
    device_ns = events["duration_ns"].where(~events["fallback"], 0)
    grouped = events.assign(device_ns=device_ns).groupby("name", sort=False)
    summary = pd.DataFrame({
        "classification": grouped["classification"].first(),
        "category": grouped["category"].first(),
        "calls": grouped.size(),
        "device_time_us": grouped["device_ns"].sum() / 1000,
        "cpu_time_us": grouped["cpu_op_us"].sum(),
        "est_trn2_us": grouped["est_trn2_ns"].sum() / 1000,
        "bound": (grouped["roofline_compute_ns"].sum() > grouped["roofline_memory_ns"].sum())
        .map({True: "compute", False: "memory"}),
        "flops": grouped["flops"].sum(),
        "bytes_moved": grouped["bytes_in"].sum() + grouped["bytes_out"].sum(),
        "fallback_bytes": grouped["fallback_bytes"].sum(),
        "host_transfers": grouped["host_transfer"].count(),
        "host_bytes": grouped["host_bytes"].sum(),
        "distinct_neffs": grouped["cache_key"].nunique(),
        "nki_est_us": grouped["nki_est_ns"].sum(min_count=1) / 1000,
    }).reset_index()
    summary = summary.sort_values(["device_time_us", "cpu_time_us"], ascending=False, kind="stable")
    return summary.reset_index(drop=True)[SUMMARY_SCHEMA.names]


def write(frame: pd.DataFrame, schema: pa.Schema, path: Path) -> None:
    """Write `frame` as Parquet with the documented schema."""
    pq.write_table(pa.Table.from_pandas(frame, schema=schema, preserve_index=False), path)
