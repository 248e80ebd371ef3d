"""Profiling on the simulated neuron device: the seed article's NeuronConfig recipe reports device hot spots,
writes the documented run directory (trace with a device track, Parquet tables), marks CPU fallbacks with
their bytes, and `neuronkit.profiling.profile` respects warm-up and reports its overhead."""

from __future__ import annotations

import gc
import json
import os
import socket
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity
from transformers import AutoModelForCausalLM

import neuronkit.profiling
from neuronkit.device.simulator import tracking
from neuronkit.profiling import roofline
from neuronkit.profiling.capture import CAPTURE
from neuronkit.resources import data_dir

TINY_QWEN3 = data_dir() / "models" / "tiny-qwen3"
DEVICE_PID = 1 << 22  # neuron:0's track in trace.json (neuronkit/profiling/trace.py)


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32)).to("neuron")


def _run_dir(output_dir: Path) -> Path:
    """The single `<instance-id>_pid_<pid>/<timestamp>/` directory under `output_dir`."""
    runs = list(output_dir.glob("*_pid_*/*"))
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture(scope="module")
def seed_snippet(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The seed article's profiling snippet, as written, around three steps of a small model; an
    independent observer counts the op events the device kernel ran inside the window."""
    OUTPUT_DIR = str(tmp_path_factory.mktemp("profile"))  # noqa: N806 - the snippet's name
    model, x = _mlp(), torch.randn(16, 32, device="neuron")
    with torch.no_grad():
        for _ in range(3):  # warm up first (docs: 3+ iterations)
            model(x)
    seen: list[tracking.OpEvent] = []

    from torch_neuronx.profiling import NeuronConfig, ProfileMode, NeuronProfiler

    nc = NeuronConfig(
       modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME],
       profile_output_dir=OUTPUT_DIR,
       capture_enabled_for_nc='0',
       correlate_device_time=True,
    )
    with torch.profiler.profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        experimental_config=nc,
        on_trace_ready=NeuronProfiler(nc).export_trace,
    ) as prof:
        tracking.observers.append(seen.append)
        with torch.no_grad():
            for _ in range(3):
                model(x)
        torch.neuron.synchronize()
        tracking.observers.remove(seen.append)
    # 按设备侧耗时排序，直接看热点
    table = prof.key_averages().table(sort_by="self_privateuse1_time_total", row_limit=4)
    return {"prof": prof, "table": table, "output_dir": Path(OUTPUT_DIR), "seen": seen}


def test_seed_snippet_resolves_to_neuronkit() -> None:
    """While simulating, torch_neuronx.profiling is neuronkit.profiling."""
    from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode

    assert (NeuronConfig, NeuronProfiler, ProfileMode) == (
        neuronkit.profiling.NeuronConfig, neuronkit.profiling.NeuronProfiler, neuronkit.profiling.ProfileMode)
    assert isinstance(NeuronConfig(), torch._C._profiler._ExperimentalConfig)
    assert NeuronConfig().modes == [ProfileMode.DEVICE, ProfileMode.RUNTIME]


def test_hot_spot_table_has_device_time_for_device_ops(seed_snippet: dict) -> None:
    """The table is sorted by device time, and every op that ran on the device has non-zero device time."""
    table = seed_snippet["table"]
    print(table)
    assert "Self NEURON" in table
    averages = seed_snippet["prof"].key_averages()
    device_ops = {e.name for e in seed_snippet["seen"] if not e.fallback}
    assert device_ops >= {"aten::addmm", "aten::gelu"}
    cpu_rows = {a.key: a for a in averages if a.device_type == DeviceType.CPU}
    for name in device_ops:
        assert cpu_rows[name].self_device_time_total > 0, name
        device_row = next(a for a in averages if a.key == f"nc_exec[{name}]")
        assert device_row.device_type == DeviceType.PrivateUse1 and device_row.self_device_time_total > 0
    shown = [line.split()[0] for line in table.split("\n")[3:7]]  # the 4 rows under the header
    assert all(next(a for a in averages if a.key == name).self_device_time_total > 0 for name in shown)


def test_trace_in_documented_layout_with_device_track(seed_snippet: dict) -> None:
    """<out>/<instance-id>_pid_<pid>/<timestamp>/trace.json parses, keeps the CPU ops and adds a device
    process whose executions sit inside the CPU op that launched them."""
    run = _run_dir(seed_snippet["output_dir"])
    assert run.parent.name == f"{socket.gethostname()}_pid_{os.getpid()}"
    trace = json.loads((run / "trace.json").read_text())
    events = trace["traceEvents"]
    names = {(e["pid"], e["args"]["name"]) for e in events if e.get("name") == "process_name"}
    assert (DEVICE_PID, "neuron:0 (simulated NeuronCore)") in names
    cpu_ops = {e["args"]["External id"]: e for e in events if e.get("cat") == "cpu_op"}
    device = [e for e in events if e.get("cat") == "kernel"]
    assert len(device) == sum(not e.fallback for e in seed_snippet["seen"])
    for e in device:
        assert e["pid"] == DEVICE_PID and e["args"]["neff_cache_key"]
        launcher = cpu_ops[e["args"]["External id"]]
        assert launcher["name"] == e["args"]["op"] and launcher["pid"] != DEVICE_PID
        assert launcher["ts"] <= e["ts"] and e["ts"] + e["dur"] <= launcher["ts"] + launcher["dur"]
    assert sum(e.get("ph") == "f" and e.get("cat") == "ac2g" for e in events) == len(device)


def test_parquet_rows_equal_profiled_op_events(seed_snippet: dict) -> None:
    """One row per op event the kernel ran in the window; the summary aggregates them per op."""
    run = _run_dir(seed_snippet["output_dir"])
    events = pd.read_parquet(run / "op_events.parquet")
    seen = seed_snippet["seen"]
    assert len(events) == len(seen)
    assert list(events["name"]) == [e.name for e in seen]
    assert list(events["duration_ns"]) == [e.duration_ns for e in seen]
    assert events["cache_key"].tolist() == [e.cache_key for e in seen]
    assert events["cpu_op_id"].notna().all()
    summary = pd.read_parquet(run / "op_summary.parquet")
    assert summary["calls"].sum() == len(seen)
    addmm = summary.set_index("name").loc["aten::addmm"]
    assert addmm["calls"] == 6 and addmm["flops"] == 3 * 2 * (2 * 16 * 32 * 64)
    assert addmm["device_time_us"] == pytest.approx(events.query("name == 'aten::addmm'")["duration_ns"].sum() / 1e3)


def test_fallback_ops_are_marked_with_their_bytes(tmp_path: Path) -> None:
    """torch.cumprod has no native lowering: it is a cpu_fallback row carrying the bytes it copies, with
    no device time; the executed ops' NEFFs are copied from the cache into the run directory."""
    x = torch.randn(64, 32, device="neuron")
    (x * 2).sum()  # warm up
    torch.cumprod(x, 0)
    cache = torch.neuron.neff_cache_stats()["directory"]
    nc = neuronkit.profiling.NeuronConfig(profile_output_dir=tmp_path, correlate_device_time=True,
                                          neff_cache_dir=cache)
    exporter = neuronkit.profiling.NeuronProfiler(nc)
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                experimental_config=nc, on_trace_ready=exporter.export_trace) as prof:
        torch.cumprod(x * 2, 0).sum()
    rows = exporter.last.events.set_index("name")
    cumprod = rows.loc["aten::cumprod"]
    assert cumprod["fallback"] and cumprod["classification"] == "cpu_fallback"
    # S's fallback receives cumprod.out (cumprod's composite calls it): self and out go to the host, out comes back
    assert cumprod["fallback_bytes"] == cumprod["bytes_in"] + cumprod["bytes_out"] == 3 * x.numel() * 4
    assert pd.isna(cumprod["cache_key"])
    assert rows.loc["aten::mul", "fallback_bytes"] == 0
    summary = exporter.last.summary.set_index("name")
    assert summary.loc["aten::cumprod", "device_time_us"] == 0 and summary.loc["aten::mul", "device_time_us"] > 0
    assert not any(a.key == "nc_exec[aten::cumprod]" for a in prof.key_averages())
    trace = json.loads(exporter.last.trace_path.read_text())
    fallback = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_fallback"]
    assert [e["args"]["fallback_bytes_copied"] for e in fallback] == [3 * x.numel() * 4]
    if cache is not None:
        keys = set(rows["cache_key"].dropna())
        assert {p.name for p in exporter.last.run_dir.glob("*.neff")} == {f"neff_{k}_vnc_0.neff" for k in keys}


def test_capture_respects_cores_and_event_cap(tmp_path: Path) -> None:
    """capture_enabled_for_nc names the cores captured; max_events_per_nc caps each, with a warning."""
    x = torch.randn(8, 8, device="neuron")
    exported = []
    for kwargs in ({"capture_enabled_for_nc": "1-3"}, {"max_events_per_nc": 2}):
        nc = neuronkit.profiling.NeuronConfig(profile_output_dir=tmp_path, **kwargs)
        exporter = neuronkit.profiling.NeuronProfiler(nc)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                        experimental_config=nc, on_trace_ready=exporter.export_trace):
                for _ in range(3):
                    x @ x + 1
        exported.append((len(exporter.last.events), exporter.last.dropped_events,
                         [str(w.message) for w in caught if w.category is RuntimeWarning]))
    assert exported[0] == (0, 0, [])
    assert exported[1][:2] == (2, 4) and "4 device events beyond max_events_per_nc=2" in exported[1][2][0]


def test_capture_observes_the_kernel_only_while_a_config_lives() -> None:
    """One process-wide capture, attached while a device-mode NeuronConfig is alive."""
    gc.collect()  # configs of earlier tests, kept by the profiler's reference cycles
    users = CAPTURE.users
    config = neuronkit.profiling.NeuronConfig()
    assert CAPTURE in tracking.profiler_observers and CAPTURE.users == users + 1
    del config
    gc.collect()
    assert CAPTURE.users == users
    neuronkit.profiling.NeuronConfig(modes=[neuronkit.profiling.ProfileMode.CPU_UTIL])
    assert CAPTURE.users == users


class _WarmupProbe(torch.nn.Module):
    """Runs a distinctive op (cumprod) only on its first three calls: the warm-up."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = _mlp()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls <= 3:
            x = torch.cumprod(x, 1)
        return self.inner(x)


def test_profile_excludes_warmup_and_reports_overhead(tmp_path: Path) -> None:
    """Only the profiled steps' ops are in the result; overhead is the ratio of median step times."""
    probe = _WarmupProbe()
    top = neuronkit.profiling.profile(probe, torch.randn(4, 32, device="neuron"), steps=2, warmup=3,
                                      output_dir=tmp_path)
    assert probe.calls == 3 + 2 + 2  # warm-up, plain timing, profiled
    assert "aten::cumprod" not in set(top["name"])
    assert top.set_index("name").loc["aten::addmm", "calls"] == 2 * 2
    overhead = top.attrs["overhead"]
    assert overhead["plain_ms"] > 0 and overhead["profiled_ms"] > 0
    assert overhead["ratio"] == pytest.approx(overhead["profiled_ms"] / overhead["plain_ms"])
    assert overhead["reading"] == ("high" if overhead["ratio"] >= neuronkit.profiling.HIGH_OVERHEAD else "low")
    # the roofline estimate of one step on trn2: every op's estimate over the profiled steps, per step
    assert top.attrs["est_trn2_step_us"] == pytest.approx(top["est_trn2_us"].sum() / 2)
    assert top.attrs["events"] == len(pd.read_parquet(top.attrs["parquet_path"])) == 2 * 3
    assert Path(top.attrs["trace_path"]).parent == _run_dir(tmp_path)


def test_profile_tiny_qwen3_top_ops(tmp_path: Path) -> None:
    """The workbook call on the bundled Qwen3: device-time-sorted ops with estimates and module paths."""
    model = AutoModelForCausalLM.from_pretrained(TINY_QWEN3).to("neuron").eval()
    ids = torch.randint(0, model.config.vocab_size, (1, 16)).to("neuron")
    top = neuronkit.profiling.profile(model, {"input_ids": ids}, steps=1, warmup=3, output_dir=tmp_path)
    assert list(top.columns[:8]) == ["name", "classification", "category", "calls", "device_time_us",
                                     "cpu_time_us", "est_trn2_us", "bound"]
    assert top["device_time_us"].is_monotonic_decreasing and (top["device_time_us"] > 0).all()
    assert {"aten::mm", "aten::_scaled_dot_product_fused_attention_overrideable"} <= set(top["name"])
    assert top.attrs["fallbacks"] == []
    assert set(top["bound"]) <= {"compute", "memory"} and (top["est_trn2_us"] > 0).all()
    events = pd.read_parquet(top.attrs["parquet_path"])
    q_proj = events[events["module_path"].fillna("").str.endswith("self_attn.q_proj")]
    assert set(q_proj["name"]) == {"aten::mm"}


def test_warmup_below_three_warns(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="at least 3 warm-up"):
        neuronkit.profiling.profile(_mlp(), torch.randn(2, 32, device="neuron"), steps=1, warmup=1,
                                    output_dir=tmp_path)


def test_roofline_estimate_from_published_peaks() -> None:
    """A large bf16 matmul is compute-bound at the Trainium2 BF16 peak; an elementwise op is memory-bound."""
    peaks = roofline.core_peaks(2)
    assert peaks.flops_per_s["bf16"] == pytest.approx(667e12 * 2 / 8)
    assert peaks.hbm_bytes_per_s == pytest.approx(2.9e12 * 2 / 8)
    n = 4096
    mm = roofline.estimate("aten::mm", ((n, n), (n, n)), ("torch.bfloat16",) * 2, 2 * n * n * 2, n * n * 2, peaks)
    assert mm.flops == 2 * n ** 3 and mm.bound == "compute"
    assert mm.ns == pytest.approx(2 * n ** 3 / peaks.flops_per_s["bf16"] * 1e9)
    add = roofline.estimate("aten::add", ((n, n), (n, n)), ("torch.float32",) * 2, 2 * n * n * 4, n * n * 4, peaks)
    assert add.flops == 0 and add.bound == "memory"
    assert add.ns == pytest.approx(3 * n * n * 4 / peaks.hbm_bytes_per_s * 1e9)
    conv = roofline.op_flops("aten::convolution", ((1, 3, 8, 8), (16, 3, 3, 3)), ("torch.float32",) * 2,
                             1 * 16 * 6 * 6 * 4)
    assert conv == 2 * (16 * 6 * 6) * 27
    assert roofline.op_flops("aten::addmm", ((5,), (2, 3), (3, 5)), (), 0) == 2 * 2 * 3 * 5


def test_only_kinetos_trace_markers_are_dropped_from_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    from neuronkit.profiling.markers import without_trace_markers

    def profiled() -> None:
        with torch.profiler.profile(activities=[ProfilerActivity.CPU]):
            torch.ones(2) + 1

    if int(os.environ.get("KINETO_LOG_LEVEL", "0")) < 5:  # kineto prints the markers at its default level
        profiled()
        assert "] profiler_start" in capfd.readouterr().err
    with without_trace_markers():
        profiled()
        os.write(2, b"ERROR: kineto could not write the trace\n")  # what a real problem looks like
    err = capfd.readouterr().err
    assert "profiler_start" not in err and "profiler_stop" not in err
    assert "ERROR: kineto could not write the trace" in err
