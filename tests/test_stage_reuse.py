"""Stages keep what the notebook's cells made. The compile stage takes over a model the caller already
compiled (notebook 04's cell): its graphs serve the stage's calls, the first call's times are the caller's,
and nothing is traced again; when it cannot (a graph break in the process, another dtype) it compiles its
own, as before. The profiling stage keeps the caller's exported profile (notebook 05's recipe)."""

from __future__ import annotations

import copy
import time

import pytest
import torch
from torch._dynamo.utils import counters
from torch.profiler import ProfilerActivity

from conftest import TwoLayerMLP
from neuronkit import check
from neuronkit.checks.parity import Compiled
from neuronkit.profiling import NeuronConfig, NeuronProfiler, ProfileMode
from neuronkit.profiling.api import from_export


class LogsItsMean(TwoLayerMLP):
    """Reads a device value on the host at the end of forward: a graph break after the one graph."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        self.last_mean = out.mean().item()
        return out


def compiled_by_hand(model: torch.nn.Module, x: torch.Tensor) -> Compiled:
    """What notebook 04's cell does: a device copy, `torch.compile(..., backend="neuron")`, one timed
    training step (the check's loss for a plain tensor output is its mean square)."""
    net = copy.deepcopy(model).to("neuron")
    compiled = torch.compile(net, backend="neuron")
    torch.neuron.reset_dynamo_metrics()
    start = time.perf_counter()
    out = compiled(x.to("neuron"))
    forward_s, start = time.perf_counter() - start, time.perf_counter()
    out.float().pow(2).mean().backward()
    backward_s = time.perf_counter() - start
    net.zero_grad(set_to_none=True)
    return Compiled(compiled, forward_s, backward_s)


@pytest.fixture
def no_graph_breaks_yet():
    """Dynamo's graph-break counters are process-wide, and other tests leave breaks in them."""
    counters.clear()
    yield
    counters.clear()


@pytest.mark.usefixtures("fresh_dynamo")
def test_the_compile_stage_reuses_the_callers_graphs_and_first_call(no_graph_breaks_yet):
    model, x = TwoLayerMLP().eval(), torch.randn(4, 8)
    given = compiled_by_hand(model, x)
    compiled_before = len(torch.neuron.get_dynamo_metrics())
    stage = check(model, x, stages=["compile"], compiled=given).stage("compile")
    record = stage.evidence
    assert stage.status == "pass", stage.summary
    assert record.compiled_by_caller
    assert (record.graphs, record.graph_break_count, record.graph_breaks) == (1, 0, [])
    assert (record.compile_time_s, record.backward_compile_time_s) == (given.forward_s, given.backward_s)
    assert record.training.ok and all(row.ok for row in record.parity.outputs)
    # the stage's own compilations: only the second input shape's forward graph
    assert record.recompiles == 1
    assert [m["kind"] for m in torch.neuron.get_dynamo_metrics()[compiled_before:]] == ["forward"]


@pytest.mark.usefixtures("fresh_dynamo")
def test_after_a_graph_break_the_stage_compiles_its_own_to_say_where(no_graph_breaks_yet):
    model, x = LogsItsMean().eval(), torch.randn(4, 8)
    given = compiled_by_hand(model, x)
    record = check(model, x, stages=["compile"], compiled=given).stage("compile").evidence
    assert not record.compiled_by_caller
    assert record.graph_break_count >= 1 and "item" in record.graph_breaks[0].reason.lower()
    assert record.compile_time_s != given.forward_s


@pytest.mark.usefixtures("fresh_dynamo")
def test_another_dtype_is_compiled_again_under_autocast(no_graph_breaks_yet):
    model, x = TwoLayerMLP().eval(), torch.randn(4, 8)
    record = check(model, x, stages=["compile"], dtype="bfloat16",
                   compiled=compiled_by_hand(model, x)).stage("compile").evidence
    assert not record.compiled_by_caller and record.graphs == 1


@pytest.mark.usefixtures("fresh_dynamo")
def test_a_frozen_slice_is_compiled_again_on_the_stages_own_copy(no_graph_breaks_yet):
    """On a layer slice the stage's device copy holds the embeddings and head fixed: the caller's compiled
    model (all parameters trainable) cannot stand for it."""
    model, x = TwoLayerMLP().eval(), torch.randn(4, 8)
    record = check(model, x, stages=["compile"], freeze_embeddings=True,
                   compiled=compiled_by_hand(model, x)).stage("compile").evidence
    assert not record.compiled_by_caller and record.graphs == 1 and record.training.ok


def test_the_profile_the_caller_exported_is_kept_not_taken_again(tmp_path):
    model, x = TwoLayerMLP().eval().to("neuron"), torch.randn(4, 8, device="neuron")
    nc = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir=str(tmp_path),
                      correlate_device_time=True)
    exporter = NeuronProfiler(nc)
    with torch.no_grad():
        for _ in range(3):
            model(x)
        with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                    experimental_config=nc, on_trace_ready=exporter.export_trace):
            for _ in range(2):
                model(x)
    traces = sorted(tmp_path.rglob("trace.json"))
    frame = from_export(model, x, exporter.last, steps=2)
    assert sorted(tmp_path.rglob("trace.json")) == traces  # nothing profiled again
    assert frame.attrs["trace_path"] == str(exporter.last.trace_path)
    overhead = frame.attrs["overhead"]
    assert overhead["profiled_ms"] == pytest.approx(exporter.last.window_s * 1000 / 2)
    assert overhead["plain_ms"] > 0 and overhead["ratio"] == pytest.approx(overhead["profiled_ms"] / overhead["plain_ms"])
    assert frame.iloc[0]["device_time_us"] > 0 and frame.attrs["warmup"] is None
