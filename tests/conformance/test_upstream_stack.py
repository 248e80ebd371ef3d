"""What upstream libraries (FSDP2/DTensor, TorchTitan) need from the device, as the real backend gives it.
Source: S = parmoham-aws/test-repo-parmoham. The same on 2 simulated cores: tests/test_distributed.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.attention.flex_attention as flex_module
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import neuronkit.graph_compile  # noqa: F401 - registers backend="neuron"


def test_the_core_generator_is_a_16_byte_philox_seed_and_offset():
    """S: csrc/core/NeuronHooksInterface.cpp:17-98 (NeuronGeneratorImpl: 16-byte state, set_offset/get_offset,
    a new seed resets the offset, an 8-byte state sets the seed alone); tests/device/test_rng_state.py:21-24."""
    torch.neuron.manual_seed(42)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    assert state[:8].view(torch.int64).item() == 42 and state[8:].view(torch.int64).item() == 0
    moved = state.clone()
    moved[8:] = torch.tensor([1024], dtype=torch.int64).view(torch.uint8)
    torch.neuron.set_rng_state(moved)
    assert torch.neuron.initial_seed() == 42 and torch.equal(torch.neuron.get_rng_state(), moved)
    torch.neuron.set_rng_state(torch.tensor([7], dtype=torch.int64).view(torch.uint8))
    assert torch.equal(torch.neuron.get_rng_state()[8:], torch.zeros(8, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="RNG state is wrong size"):
        torch.neuron.set_rng_state(torch.zeros(5056, dtype=torch.uint8))


def test_random_ops_draw_from_the_host_generator_as_cpu_fallbacks():
    """S: tests/device/test_rng_state.py:85-104 (xfail: torch.randn(device='neuron') falls back to CPU and
    consumes the CPU generator); the device generator's state is untouched by the draw."""
    torch.manual_seed(5)
    state = torch.neuron.get_rng_state()
    on_device = [torch.randn(5, device="neuron").cpu(), torch.rand(3, device="neuron").cpu()]
    torch.manual_seed(5)
    assert torch.equal(on_device[0], torch.randn(5)) and torch.equal(on_device[1], torch.rand(3))
    assert torch.equal(torch.neuron.get_rng_state(), state)


def test_dtensors_philox_view_of_the_state_works():
    """PyTorch's DTensor RNG tracker reads the device state as (seed uint64, offset uint64) and moves the offset
    (torch/distributed/tensor/_random.py _PhiloxState), which S's 16-byte state allows (S:
    csrc/core/NeuronHooksInterface.cpp:50-84, get_state/set_state)."""
    from torch.distributed.tensor._random import _PhiloxState
    torch.neuron.manual_seed(3)
    philox = _PhiloxState(torch.neuron.get_rng_state())
    philox.offset = philox.offset + 8
    torch.neuron.set_rng_state(philox.state)
    assert _PhiloxState(torch.neuron.get_rng_state()).offset.item() == 8
    with torch.random.fork_rng(devices=[0], device_type="neuron"):
        torch.neuron.manual_seed(9)
    assert torch.neuron.initial_seed() == 3


def _no_device_check(monkeypatch) -> None:
    """The client-side change S's GPT-OSS example makes (examples/torch_compile/models/gpt_oss/attention.py:
    17-26): PyTorch's FlexAttention device check knows no `neuron`, in eager and under compile alike."""
    original = flex_module._validate_device
    monkeypatch.setattr(flex_module, "_validate_device",
                        lambda q, k, v: None if q.device.type == "neuron" else original(q, k, v))


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _inputs(requires_grad: bool = False) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    shapes = [(1, 4, 16, 8), (1, 2, 16, 8), (1, 2, 16, 8)]  # 4 query heads over 2 kv heads (GQA)
    return [torch.randn(s, generator=generator).requires_grad_(requires_grad) for s in shapes]


def test_flex_attention_is_refused_by_pytorchs_device_check_until_the_client_allows_it():
    """S: examples/torch_compile/models/gpt_oss/README.md:31 (the example patches `_validate_device`)."""
    q, k, v = (t.to("neuron") for t in _inputs())
    with pytest.raises(ValueError, match="FlexAttention is only supported on CUDA, CPU"):
        flex_attention(q, k, v, enable_gqa=True)


@pytest.mark.usefixtures("fresh_dynamo")
def test_compiled_flex_attention_is_legalized_and_matches_the_cpu(monkeypatch):
    """S: neuron_dynamo_backend/fx/passes/flex_attention_legalization.py:33-50 (the higher-order op decomposed
    into ATen ops, forward and backward, score_mod, mask and GQA), run by fx/pipelines/
    post_aot_processing_pipeline.py:46; tests/neuron_dynamo_backend/component/attention/test_flex_attention.py."""
    _no_device_check(monkeypatch)

    def attend(q, k, v, block_mask):
        return flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + 0.1 * (i - j), block_mask=block_mask,
                              enable_gqa=True)

    cpu = _inputs(requires_grad=True)  # the reference: SDPA with the same bias and mask (CPU flex has no backward)
    i, j = torch.arange(16)[:, None], torch.arange(16)[None, :]
    bias = torch.where(i >= j, 0.1 * (i - j), float("-inf"))
    expected = torch.nn.functional.scaled_dot_product_attention(*cpu, attn_mask=bias, enable_gqa=True)
    expected.sum().backward()
    device = [t.detach().to("neuron").requires_grad_() for t in cpu]
    before = len(torch.neuron.get_dynamo_metrics())
    out = torch.compile(attend, backend="neuron", fullgraph=True)(
        *device, create_block_mask(_causal, 1, 1, 16, 16, device="neuron"))
    out.sum().backward()
    assert out.device.type == "neuron"
    assert (out.detach().cpu() - expected.detach()).abs().max() < 1e-5
    for mine, theirs in zip(device, cpu):
        assert (mine.grad.cpu() - theirs.grad).abs().max() < 1e-5
    assert [m.kind for m in torch.neuron.get_dynamo_metrics()[before:]] == ["forward", "backward"]
