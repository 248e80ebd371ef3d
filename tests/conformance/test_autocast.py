"""Autocast on the device as the source registers it (fidelity audit row 9).
Source: S = parmoham-aws/test-repo-parmoham, torch_neuronx/csrc/amp/autocast_mode.cpp."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

N = "neuron"


def test_lower_precision_ops_run_in_the_autocast_dtype():
    """S: autocast_mode.cpp (AT_FORALL_LOWER_PRECISION_FP → lower_precision_fp)."""
    a, b = torch.randn(4, 4, device=N), torch.randn(4, 4, device=N)
    with torch.autocast(N, dtype=torch.bfloat16):
        assert torch.mm(a, b).dtype is torch.bfloat16
        assert torch.einsum("ij,jk->ik", a, b).dtype is torch.bfloat16


def test_fp32_ops_run_in_float32():
    """S: autocast_mode.cpp (AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE → float32)."""
    x = torch.randn(4, 4, device=N).bfloat16()
    with torch.autocast(N, dtype=torch.bfloat16):
        assert torch.exp(x).dtype is torch.float32
        assert torch.softmax(x, -1).dtype is torch.float32
        assert torch.cumsum(x, 0).dtype is torch.float32


def test_promote_ops_take_the_widest_input_type():
    """S: autocast_mode.cpp (AT_FORALL_PROMOTE → promote)."""
    a = torch.randn(4, device=N)
    b = torch.randn(4, device=N).bfloat16()
    with torch.autocast(N, dtype=torch.bfloat16):
        assert torch.addcmul(a, b, b).dtype is torch.float32
        assert torch.atan2(b, a).dtype is torch.float32


def test_binary_cross_entropy_is_banned_under_autocast():
    """S: autocast_mode.cpp:7-16 (binary_cross_entropy_banned)."""
    p = torch.rand(4, device=N)
    with torch.autocast(N, dtype=torch.bfloat16), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(p, torch.ones(4, device=N))
    assert F.binary_cross_entropy(p, torch.ones(4, device=N)).dtype is torch.float32  # fine outside autocast
