"""The `neuron` torch.compile backend: registration, the seed's snippet, numerics against eager, the
op policy inside graphs, static shapes, NEFF accounting, metrics and the fallback switch (behaviour
doc §3)."""

from __future__ import annotations

import copy
import logging

import pytest
import torch
from torch._dynamo.exc import BackendCompilerFailed

import neuronkit.graph_compile  # noqa: F401 - registers backend="neuron" (also reachable via the entry point)
from neuronkit.graph_compile.compare import grad_norm, to_device
from neuronkit.inputs import example_inputs
from neuronkit.models import load_model, load_tokenizer

BACKEND_LOG = "neuronkit.graph_compile.backend"


from conftest import TwoLayerMLP as MyModel  # noqa: E402 - the seed calls its model MyModel

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def new_metrics(before: int) -> list[dict]:
    return torch.neuron.get_dynamo_metrics()[before:]


def test_seed_snippet_compiles_with_the_default_backend():
    before = len(torch.neuron.get_dynamo_metrics())
    x = torch.randn(2, 8, device="neuron")
    try:
        # Run a compiled training loop on Trainium
        torch.compiler.set_default_backend("neuron")  # call once, before any compile
        model = MyModel().to('neuron')
        model.compile()  # no backend argument
        out = model(x)
    finally:
        torch.compiler.set_default_backend(None)
    out.sum().backward()
    assert out.device.type == "neuron"
    assert torch.allclose(out.detach().cpu(), model.forward(x).detach().cpu())  # forward() itself is not compiled
    kinds = [m["kind"] for m in new_metrics(before)]
    assert kinds == ["forward", "backward"]


def test_backend_is_listed_and_registered_on_import():
    assert "neuron" in torch._dynamo.list_backends()
    assert torch._dynamo.lookup_backend("neuron") is neuronkit.graph_compile.neuron_backend


@pytest.mark.subprocess
def test_bare_torch_compile_finds_the_backend_through_the_entry_point(forked_python):
    proc = forked_python("""
        import sys
        import torch
        assert "neuronkit.graph_compile" not in sys.modules
        model = torch.nn.Linear(4, 2).to("neuron")
        x = torch.ones(3, 4, device="neuron")
        out = torch.compile(model, backend="neuron")(x)
        assert torch.equal(out.detach().cpu(), model(x).detach().cpu())
        print(len(torch.neuron.get_dynamo_metrics()), "neuronkit.graph_compile" in sys.modules)
    """)
    assert proc.stdout.split() == ["1", "True"]


def test_tiny_qwen3_compiled_forward_and_train_step_match_eager():
    tokenizer = load_tokenizer("tiny-qwen3")
    model, _ = to_device(load_model("tiny-qwen3"), "neuron")
    inputs = {k: v.to("neuron") for k, v in example_inputs(model.config, tokenizer, 2, 16).items()}
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend="neuron", options={"model_name": "tiny-qwen3"})
    losses = {}
    for name, candidate in (("eager", eager), ("compiled", compiled)):
        out = candidate(**inputs, use_cache=False)
        out.loss.backward()
        losses[name] = (out.logits.detach().cpu(), out.loss.item(), grad_norm(eager if name == "eager" else model))
        torch.optim.SGD((eager if name == "eager" else model).parameters(), lr=0.1).step()
    assert torch.allclose(losses["eager"][0], losses["compiled"][0], atol=1e-5)
    assert losses["eager"][1] == pytest.approx(losses["compiled"][1], rel=1e-5)
    assert losses["eager"][2] == pytest.approx(losses["compiled"][2], rel=1e-4)
    for p_eager, p_compiled in zip(eager.parameters(), model.parameters()):  # the step moved both alike
        assert torch.allclose(p_eager.detach().cpu(), p_compiled.detach().cpu(), atol=1e-6)
    records = [m for m in torch.neuron.get_dynamo_metrics() if m["model_name"] == "tiny-qwen3"]
    assert {m["kind"] for m in records} == {"forward", "backward"}


def test_dynamic_true_is_rejected_naming_the_dimension_and_the_fix():
    with pytest.raises(BackendCompilerFailed, match=r"Dynamic shapes detected") as info:
        torch.compile(MyModel().to("neuron"), backend="neuron", dynamic=True)(torch.randn(3, 8, device="neuron"))
    message = str(info.value)
    assert "requires static shapes" in message and "dim 0" in message
    assert "dynamic=False" in message and "bucket" in message


def test_mark_dynamic_is_rejected_too():
    x = torch.randn(3, 8, device="neuron")
    torch._dynamo.mark_dynamic(x, 0)
    with pytest.raises(BackendCompilerFailed, match=r"Found 1 dynamic dimension\(s\): \[\w+ dim 0"):
        torch.compile(MyModel().to("neuron"), backend="neuron")(x)


def test_each_new_shape_compiles_once_with_dynamic_false():
    before = len(torch.neuron.get_dynamo_metrics())
    compiled = torch.compile(MyModel().to("neuron"), backend="neuron", dynamic=False)
    with torch.no_grad():
        for rows in (2, 3, 4, 3, 2):
            compiled(torch.randn(rows, 8, device="neuron"))
    assert len(new_metrics(before)) == 3  # one forward graph per distinct shape; repeats hit Dynamo's cache


def test_each_new_shape_gives_one_neff_without_dynamic_false():
    """Oct public-beta docs: each new shape recompiles (the default, NEURONKIT_COMPILE_SHAPES=recompile)."""
    before = len(torch.neuron.get_dynamo_metrics())
    compiled = torch.compile(MyModel().to("neuron"), backend="neuron")
    with torch.no_grad():
        for rows in (2, 3, 4, 3):
            compiled(torch.randn(rows, 8, device="neuron"))
    assert len(new_metrics(before)) == 3  # 2 static, then 3 and 4 specialised from Dynamo's dynamic graph
    assert torch._dynamo.config.automatic_dynamic_shapes


def test_each_compiled_graph_is_one_neff_and_running_it_compiles_none():
    model = MyModel().to("neuron")
    x = torch.randn(5, 8, device="neuron")
    compiled = torch.compile(model, backend="neuron")
    start = torch.neuron.neff_cache_stats()
    before = len(torch.neuron.get_dynamo_metrics())
    with torch.no_grad():
        compiled(x)
    after_compile = torch.neuron.neff_cache_stats()
    (record,) = new_metrics(before)
    graph_lookups = after_compile["hits"] + after_compile["disk_hits"] + after_compile["misses"] \
        - start["hits"] - start["disk_hits"] - start["misses"]
    assert graph_lookups == 1 and after_compile["entries"] - start["entries"] <= 1
    with torch.no_grad():
        for _ in range(3):
            compiled(x)
    assert torch.neuron.neff_cache_stats()["entries"] == after_compile["entries"]
    assert torch.neuron.neff_cache_stats()["hits"] == after_compile["hits"]
    assert record["graph_node_count"] > 0 and record["compile_time_us"] > 0 and record["neff_key"]


def test_mode_is_warned_about_and_model_name_lands_in_metrics(caplog):
    before = len(torch.neuron.get_dynamo_metrics())
    with caplog.at_level(logging.WARNING, logger=BACKEND_LOG):
        torch.compile(MyModel().to("neuron"), backend="neuron", mode="max-autotune")(torch.randn(2, 8, device="neuron"))
    assert "Neuron backend does not support mode='max-autotune', falling back to default mode." in caplog.text
    torch._dynamo.reset()
    named = torch.compile(MyModel().to("neuron"), backend="neuron", options={"model_name": "mlp"})
    named(torch.randn(2, 8, device="neuron"))
    first, second = new_metrics(before)  # forward graphs only: no backward ran
    assert first["model_name"] == "model"
    assert second["model_name"] == "mlp" and second["graph_name"].startswith("mlp_forward_")


def test_compile_failure_falls_back_to_eager_only_when_switched_on(monkeypatch, caplog):
    model = MyModel().to("neuron")
    x = torch.randn(3, 8, device="neuron")
    monkeypatch.delenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", raising=False)
    with pytest.raises(BackendCompilerFailed):  # default: fallback execution disabled, failures raise
        torch.compile(model, backend="neuron", dynamic=True)(x)
    torch._dynamo.reset()
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    with caplog.at_level(logging.WARNING, logger=BACKEND_LOG):
        out = torch.compile(model, backend="neuron", dynamic=True)(x)
    assert torch.allclose(out.detach().cpu(), model(x).detach().cpu())
    assert "Falling back to original GraphModule execution" in caplog.text
    torch._dynamo.reset()
    with pytest.raises(BackendCompilerFailed):  # the compile option overrides the environment
        torch.compile(model, backend="neuron", dynamic=True, options={"fallback_execution": False})(x)


def test_a_nan_the_cpu_reference_has_too_is_not_the_devices():
    """Parity blames the device only for what differs: a NaN (or infinity) at the same place in the CPU
    reference is the model's or its inputs'; a NaN the CPU does not have, or a different infinity, is not."""
    from neuronkit.graph_compile.compare import Tolerance, compare_outputs

    tol = Tolerance(atol=1e-5, rtol=1e-5, min_top1=0.9, train_rtol=1e-3)
    cpu = {"logits": torch.tensor([1.0, float("nan"), float("inf")])}
    (same,) = compare_outputs(cpu, {"logits": torch.tensor([1.0, float("nan"), float("inf")])}, tol)
    assert same["ok"] and same["max_abs_err"] == 0.0
    for device in ([1.0, 2.0, float("inf")], [float("nan"), float("nan"), float("inf")],
                   [1.0, float("nan"), float("-inf")]):
        assert not compare_outputs(cpu, {"logits": torch.tensor(device)}, tol)[0]["ok"], device
