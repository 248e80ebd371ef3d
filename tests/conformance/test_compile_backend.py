"""torch.compile as the real backend does it (fidelity audit row 2). Source: S = parmoham-aws/test-repo-parmoham."""

from __future__ import annotations

import logging

import pytest
import torch
from torch._dynamo.exc import BackendCompilerFailed

import neuronkit.graph_compile  # noqa: F401 - registers backend="neuron"

BACKEND_LOG = "neuronkit.graph_compile.backend"
pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def new_metrics(before: int) -> list:
    return torch.neuron.get_dynamo_metrics()[before:]


@pytest.mark.parametrize("fn, hop", [
    (lambda x: torch.cond(x.sum() > 0, lambda y: y + 1, lambda y: y - 1, (x,)), "cond"),
    (lambda x: torch._higher_order_ops.map(lambda y: y * 2, x), "map_impl"),
])
def test_higher_order_ops_fail_as_lowering_errors_naming_the_op(fn, hop):
    """S: tests/pytorch_tests/specs/dynamo_spec.json ("Higher-order operation 'cond' not implemented in the
    FxImporter")."""
    with pytest.raises(BackendCompilerFailed, match=rf"Higher-order operation '{hop}' not implemented"):
        torch.compile(fn, backend="neuron")(torch.randn(3, 4, device="neuron"))


def test_a_graph_is_lowered_whole_without_host_fallbacks(caplog):
    """S: examples/torch_compile/README.md:40 (graphs lowered through torch-mlir, no per-op host fallback)."""
    import torch_neuronx
    before = len(torch.neuron.get_dynamo_metrics())
    torch_neuronx.clear_op_tracking()
    with caplog.at_level(logging.WARNING, logger=BACKEND_LOG):
        out = torch.compile(lambda x: torch.cumprod(x, 0) + 1, backend="neuron")(torch.rand(5, device="neuron"))
    (record,) = new_metrics(before)
    assert record.fallback_ops == [] and "run on the host" not in caplog.text
    assert "aten::cumprod" not in torch_neuronx.get_fallback_ops() and out.device.type == "neuron"
    assert type(record).__name__ == "NeuronCompilationMetrics"
    assert record.torch_neuronx_fx_passes_us > 0 and record.torch_neuronx_lower_us > 0


def test_a_second_shape_turns_dynamic_and_is_rejected_as_in_the_source(monkeypatch):
    """S: examples/compile/QUICKSTART.md "Dynamic shapes": Dynamo's automatic dynamic shapes stay on, so a
    second shape without dynamic=False reaches the backend symbolic and fails (NEURONKIT_COMPILE_SHAPES=source)."""
    monkeypatch.setenv("NEURONKIT_COMPILE_SHAPES", "source")
    compiled = torch.compile(lambda x: x * 2 + 1, backend="neuron")  # a code object no other test compiled
    compiled(torch.randn(2, 8, device="neuron"))
    with pytest.raises(BackendCompilerFailed, match="dynamic=False"):
        compiled(torch.randn(3, 8, device="neuron"))
    assert torch._dynamo.config.automatic_dynamic_shapes  # nothing process-wide changed


def _complex_rope(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Rotary embeddings the Llama 4 / DeepSeek-V2 way: pairs as complex numbers times unit phasors."""
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    rotated = pairs * torch.polar(torch.ones_like(freqs), freqs)
    return torch.view_as_real(rotated).flatten(-2)


def test_complex_ops_decompose_under_compile_from_torch_2_13(monkeypatch):
    """Oct docs (env-vars page, 2026-10-14; newer than S, which lacks it): TORCH_NEURONX_COMPLEX_DECOMPOSE
    decomposes complex ops before lowering, on by default for PyTorch >= 2.13, so a compiled complex RoPE
    runs and matches the CPU; eager mode still refuses complex math on the device (S: tests/pytorch_tests/
    specs/aten_spec.json), and so does the compile path with the variable set to 0."""
    from neuronkit.device.simulator import compiled_graphs

    assert compiled_graphs.complex_decompose("2.13.0") and not compiled_graphs.complex_decompose("2.12.0")
    x, freqs = torch.randn(2, 4, 8), torch.randn(4, 4)
    expected = _complex_rope(x, freqs)
    compiled = torch.compile(_complex_rope, backend="neuron", dynamic=False)
    torch.testing.assert_close(compiled(x.to("neuron"), freqs.to("neuron")).cpu(), expected)
    with pytest.raises(RuntimeError, match="Complex data types are not supported on Neuron"):
        _complex_rope(x.to("neuron"), freqs.to("neuron"))
    monkeypatch.setenv("TORCH_NEURONX_COMPLEX_DECOMPOSE", "0")
    torch._dynamo.reset()
    with pytest.raises(Exception, match="Complex data types are not supported on Neuron"):
        torch.compile(_complex_rope, backend="neuron", dynamic=False)(x.to("neuron"), freqs.to("neuron"))


def test_a_compiled_complex_ropes_gradient_matches_the_cpu():
    """The backward of a complex multiply conjugates the other factor (AOTAutograd: `_conj`, a view on the
    device, then `clone`): the graph's ops read the conjugation bit, so the gradient is the CPU's, not the
    unconjugated product's (a false training-step failure of Llama 4 and DeepSeek-V2 under torch.compile).
    S: conj is a whitelisted metadata view (torch_neuronx/csrc/core/NeuronBindings.cpp:205-208), and the Oct
    docs run a compiled complex RoPE (TORCH_NEURONX_COMPLEX_DECOMPOSE)."""
    x, freqs = torch.randn(2, 4, 8, requires_grad=True), torch.randn(4, 4)
    _complex_rope(x, freqs).pow(2).sum().backward()
    on_device = x.detach().to("neuron").requires_grad_()
    compiled = torch.compile(_complex_rope, backend="neuron", dynamic=False)
    compiled(on_device, freqs.to("neuron")).pow(2).sum().backward()
    torch.testing.assert_close(on_device.grad.cpu(), x.grad)
