"""Every op-support policy category, demonstrated on the simulated device (data/op_support.toml)."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn as nn
import torch.nn.functional as F
import torch_neuronx

N = "neuron"


def _x() -> torch.Tensor:
    return torch.randn(4, 4).to(N)


BLOCKED = {
    "sparse: to_sparse": ("sparse", lambda: _x().to_sparse()),
    "sparse: coo constructor": ("sparse", lambda: torch.sparse_coo_tensor(
        torch.tensor([[0, 1], [1, 0]]), torch.tensor([1.0, 2.0]), (2, 2), device=N)),
    "sparse: embedding gradient": ("sparse", lambda: nn.Embedding(10, 4, sparse=True).to(N)(
        torch.tensor([1, 2], device=N)).sum().backward()),
    "nested_tensor": ("nested_tensor", lambda: torch.nested.nested_tensor(
        [torch.randn(2, 3), torch.randn(3, 3)], layout=torch.jagged, device=N)),
    "nested_tensor from device tensors": ("nested_tensor", lambda: torch.nested.as_nested_tensor(
        [torch.randn(2, 3).to(N), torch.randn(3, 3).to(N)])),
    "per_channel_quant": ("per_channel_quant", lambda: torch.quantize_per_channel(
        _x(), torch.ones(4).to(N), torch.zeros(4, dtype=torch.long).to(N), 0, torch.qint8)),
    "fused_rnn: lstm": ("fused_rnn", lambda: nn.LSTM(4, 4).to(N)(torch.randn(3, 1, 4).to(N))),
    "fused_rnn: gru": ("fused_rnn", lambda: nn.GRU(4, 4).to(N)(torch.randn(3, 1, 4).to(N))),
}


def _forward_ad():
    with fwAD.dual_level():
        fwAD.make_dual(_x(), torch.ones(4, 4).to(N))


BLOCKED["forward_ad"] = ("forward_ad", _forward_ad)


@pytest.mark.parametrize("case", sorted(BLOCKED))
def test_gaps_the_device_raises_for_name_feature_and_remedy(case):
    category, action = BLOCKED[case]
    with pytest.raises(NotImplementedError) as info:
        action()
    message = str(info.value)
    assert f"[{category}]" in message
    assert "not supported on the Neuron device" in message
    assert message.rstrip().endswith(".")  # a remedy sentence follows the category


@pytest.mark.parametrize("mask_kind", ["none", "is_causal", "explicit causal bool", "explicit causal additive"])
def test_sdpa_accepts_no_mask_or_causal(mask_kind):
    q = torch.randn(1, 2, 8, 16)
    causal = torch.ones(8, 8, dtype=torch.bool).tril()
    kwargs = {
        "none": {},
        "is_causal": {"is_causal": True},
        "explicit causal bool": {"attn_mask": causal},
        "explicit causal additive": {"attn_mask": torch.zeros(8, 8).masked_fill(~causal, float("-inf"))},
    }[mask_kind]
    expected = F.scaled_dot_product_attention(q, q, q, **kwargs)
    on_device = F.scaled_dot_product_attention(*[q.to(N)] * 3, **{k: v.to(N) if isinstance(v, torch.Tensor) else v
                                                                   for k, v in kwargs.items()})
    torch.testing.assert_close(on_device.cpu(), expected, atol=1e-5, rtol=1e-5)


def test_ops_without_lowering_fall_back_to_cpu_silently():
    x = _x()
    torch_neuronx.clear_op_tracking()
    result = torch.cumprod(x, dim=0)
    assert result.device.type == "neuron"
    torch.testing.assert_close(result.cpu(), torch.cumprod(x.cpu(), dim=0))
    assert "aten::cumprod.out" in torch_neuronx.get_fallback_ops()  # the overload its composite calls


def test_dynamic_shape_ops_run_in_eager():
    x = torch.tensor([[0.0, 1.0], [2.0, 0.0]]).to(N)
    assert torch.nonzero(x).cpu().tolist() == [[0, 1], [1, 0]]


def test_float64_is_computed_in_float32():
    x = torch.tensor([1.0], dtype=torch.float64)
    on_device = (x.to(N) + 1e-10) - 1
    assert on_device.dtype == torch.float64  # held at its width ...
    assert on_device.item() == 0.0  # ... computed in 32 bit: 1e-10 is lost
    assert ((x + 1e-10) - 1).item() != 0.0


def test_int64_is_computed_in_int32():
    big = torch.tensor([2**31 - 1])
    assert (big.to(N) + 1).item() == -(2**31)  # wraps like int32 arithmetic
    assert (big + 1).item() == 2**31


def test_strict_mode_turns_fallbacks_into_errors(forked_python):
    proc = forked_python("""
        import torch
        x = torch.randn(3).to("neuron")
        (x * 2).sum()  # native ops still run
        try:
            torch.cumprod(x, 0)
        except RuntimeError as e:
            print("ERR", e)
    """, env={"NEURONKIT_STRICT": "1"})
    assert "ERR CPU fallback is disabled for operation=aten::cumprod" in proc.stdout


test_strict_mode_turns_fallbacks_into_errors = pytest.mark.subprocess(test_strict_mode_turns_fallbacks_into_errors)
