"""The run directory and the framework trace with a device track (behaviour doc §6 output tree).

`<profile_output_dir>/<instance-id>_pid_<pid>/<timestamp>/trace.json`: PyTorch's own Chrome trace
(`export_chrome_trace`) plus one process per NeuronCore holding the device executions (`cat: kernel`,
with NEFF cache key, shapes, bytes and the Trainium2 estimate in `args`), a lane for CPU fallbacks with
the bytes they copy, and `ac2g` flow arrows from each launching CPU op, as Kineto draws CUDA kernels.
Off EC2 there is no instance id: the host name stands in for it.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import socket
from pathlib import Path

import torch

from neuronkit.profiling.correlate import DeviceOp

TRACE_NAME = "trace.json"
_DEVICE_PID_BASE = 1 << 22  # above Linux's pid_max, so a device track never collides with a host pid
_EXEC_TID, _FALLBACK_TID = 1, 2


def run_directory(output_dir: Path) -> Path:
    """Create and return `<output_dir>/<instance-id>_pid_<pid>/<timestamp>/`."""
    instance = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()) or "localhost"
    stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
    path = Path(output_dir) / f"{instance}_pid_{os.getpid()}" / stamp
    path.mkdir(parents=True, exist_ok=False)
    return path


def write_trace(prof: torch.profiler.profile, path: Path, ops: list[DeviceOp], trace_start_ns: int) -> None:
    """PyTorch's trace of `prof`, with the device track added, written to `path`."""
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace.setdefault("traceEvents", [])
    base_ns = int(trace.get("baseTimeNanoseconds", 0))
    cpu_ops = {e["args"]["External id"]: e for e in events
               if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    for core in sorted({op.captured.core for op in ops}):
        events.extend(_track_metadata(core))
    for op in ops:
        ts = (trace_start_ns + op.start_ns - base_ns) / 1000
        device = _device_event(op, ts)
        events.append(device)
        launcher = cpu_ops.get(op.cpu.id) if op.cpu is not None else None
        if launcher is not None and not op.event.fallback:
            events.extend(_flow(op.cpu.id, launcher, device))
    path.write_text(json.dumps(trace))


def _track_metadata(core: int) -> list[dict]:
    pid = _DEVICE_PID_BASE + core
    meta = [("process_name", {"name": f"neuron:{core} (simulated NeuronCore)"}),
            ("process_labels", {"labels": "PrivateUse1"}), ("process_sort_index", {"sort_index": pid})]
    events = [{"ph": "M", "name": name, "pid": pid, "tid": 0, "args": args} for name, args in meta]
    for tid, label in ((_EXEC_TID, "device execution (NEFF)"), (_FALLBACK_TID, "CPU fallback (host, copies)")):
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": label}})
    return events


def _device_event(op: DeviceOp, ts: float) -> dict:
    e = op.event
    args = {
        "op": e.name, "overload": e.overload, "category": e.category, "device": op.captured.core,
        "neff_cache_key": e.cache_key, "cache_hit": e.cache_hit, "input_shapes": [list(s) for s in e.input_shapes],
        "input_dtypes": list(e.input_dtypes), "bytes_in": e.bytes_in, "bytes_out": e.bytes_out,
        "module_path": op.captured.module_path, "flops": op.estimate.flops,
        "est_trn2_us (estimate)": round(op.estimate.ns / 1000, 3), "bound (estimate)": op.estimate.bound,
    }
    if e.engine_estimate is not None:  # an NKI kernel: `dur` is the interpreter's host time
        args["nki_engine_time (estimate)"] = e.engine_estimate.as_dict()
    if op.cpu is not None:
        args["External id"] = op.cpu.id
    if e.fallback:
        args["fallback_bytes_copied"] = e.bytes_in + e.bytes_out
    return {"ph": "X", "cat": "cpu_fallback" if e.fallback else "kernel",
            "name": e.name if e.fallback else op.device_name, "pid": _DEVICE_PID_BASE + op.captured.core,
            "tid": _FALLBACK_TID if e.fallback else _EXEC_TID, "ts": ts, "dur": e.duration_ns / 1000, "args": args}


def _flow(flow_id: int, launcher: dict, device: dict) -> list[dict]:
    common = {"cat": "ac2g", "name": "ac2g", "id": flow_id}
    return [{"ph": "s", "pid": launcher["pid"], "tid": launcher["tid"], "ts": launcher["ts"], **common},
            {"ph": "f", "bp": "e", "pid": device["pid"], "tid": device["tid"], "ts": device["ts"], **common}]
