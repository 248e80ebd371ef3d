"""Stages keep what the notebook's cells made. The compile stage takes over a model the caller already
compiled (notebook 04's cell): its graphs serve the stage's calls, the first call's times are the caller's,
and nothing is traced again; when it cannot (a graph break in the process, another dtype) it compiles its
own, as before. The profiling stage keeps the caller's exported profile (notebook 05's recipe). The eager
stages run the model notebook 02 loaded onto the device, not a copy, and leave it as it was."""

from __future__ import annotations

import copy
import time

import pytest
import torch
from torch._dynamo.utils import counters
from torch.profiler import ProfilerActivity

from conftest import TwoLayerMLP
from neuronkit.pipeline.check import check
from neuronkit.pipeline.config import DEFAULTS
from neuronkit.pipeline.session import Compiled, Session
from neuronkit.profiling import NeuronConfig, NeuronProfiler, ProfileMode
from neuronkit.profiling.api import from_export


class LogsItsMean(TwoLayerMLP):
    """Reads a device value on the host at the end of forward: a graph break after the one graph."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        self.last_mean = out.mean().item()
        return out


class TinyLM(torch.nn.Module):
    """Embeddings, one block and a head: what a layer slice freezes (`get_input_embeddings`,
    `get_output_embeddings`) and what it trains."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.block, self.head = torch.nn.Embedding(32, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 32)

    def get_input_embeddings(self) -> torch.nn.Module:
        return self.embed

    def get_output_embeddings(self) -> torch.nn.Module:
        return self.head

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.block(self.embed(ids))))


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
    stage = check(Session.build(model, x).using(compiled=given), ["compile"]).stage("compile")
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
    record = check(Session.build(model, x).using(compiled=given), ["compile"]).stage("compile").evidence
    assert not record.compiled_by_caller
    assert record.graph_break_count >= 1 and "item" in record.graph_breaks[0].reason.lower()
    assert record.compile_time_s != given.forward_s


@pytest.mark.usefixtures("fresh_dynamo")
def test_another_dtype_is_compiled_again_under_autocast(no_graph_breaks_yet):
    model, x = TwoLayerMLP().eval(), torch.randn(4, 8)
    session = Session.build(model, x, config=DEFAULTS.with_options(dtype="bfloat16"))
    record = check(session.using(compiled=compiled_by_hand(model, x)), ["compile"]).stage("compile").evidence
    assert not record.compiled_by_caller and record.graphs == 1


@pytest.mark.usefixtures("fresh_dynamo")
def test_a_frozen_slice_compiles_the_callers_module_again_and_gives_it_back(no_graph_breaks_yet, monkeypatch):
    """On a layer slice the stage holds the embeddings and head fixed: the caller's graphs (all parameters
    trainable) cannot stand for it, so it compiles the caller's module again (no device copy of its own:
    memory for one copy of the weights fewer) and gives it back with its gradient flags."""
    from neuronkit.graph_compile import compare

    model, x = TinyLM().eval(), torch.randint(0, 32, (2, 6))
    given = compiled_by_hand(model, x)
    copies, real = [], compare.device_copy
    monkeypatch.setattr(compare, "device_copy", lambda *a, **k: copies.append(a) or real(*a, **k))
    record = check(Session.build(model, x).using(freeze=True, compiled=given), ["compile"]).stage("compile").evidence
    assert not record.compiled_by_caller and record.graphs == 1 and record.training.ok
    assert copies == [] and all(p.requires_grad for p in given.module._orig_mod.parameters())


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


def test_the_eager_steps_run_the_callers_device_model_and_leave_it_as_it_was(monkeypatch):
    """Notebook 02 loads the model straight onto the device: the eager, generate and train steps run that model
    (no copy of their own: one copy of the weights fewer), and leave its weights, gradient flags and mode as
    they were, also when they hold the embeddings and head fixed (a layer slice)."""
    import transformers

    from neuronkit import models
    from neuronkit.errors import NeuronkitInputError
    from neuronkit.graph_compile import compare

    path = models.resolve_model("tiny-qwen3")
    model_class = getattr(transformers, transformers.AutoConfig.from_pretrained(path).architectures[0])
    cpu_model, device_model = model_class.from_pretrained(path), model_class.from_pretrained(path, device_map="neuron")
    device_model.train()  # as a learner's cell may leave it
    weights = {name: p.detach().cpu().clone() for name, p in device_model.named_parameters()}
    flags = {name: p.requires_grad for name, p in device_model.named_parameters()}
    copies, real = [], compare.device_copy
    monkeypatch.setattr(compare, "device_copy", lambda *a, **k: copies.append(a) or real(*a, **k))
    session = Session.build(cpu_model, config=DEFAULTS.with_options(train_steps=1, generate_tokens=2),
                            tokenizer=models.load_tokenizer("tiny-qwen3"))
    report = check(session.using(device_model=device_model, freeze=True), ["eager", "generate", "train"])
    assert report.ok, report.table()
    assert copies == [] and report.stage("train").evidence.frozen  # its own model, held fixed there
    assert device_model.training
    assert {name: p.requires_grad for name, p in device_model.named_parameters()} == flags
    assert all(torch.equal(p.detach().cpu(), weights[name]) for name, p in device_model.named_parameters())
    with pytest.raises(NeuronkitInputError, match="device_model"):
        session.using(device_model=cpu_model)
