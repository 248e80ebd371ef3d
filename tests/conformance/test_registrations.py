"""Which of S's kernels serves an op it registers twice, per torch version, and the input checks each kernel
brings (fidelity review §2, §4.2)."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn

from neuronkit import preconditions
from neuronkit.op_audit import audit
from neuronkit.policy import later_registration_wins, load_policy

N = "neuron"


def test_the_later_registration_wins_from_torch_2_13():
    """Oct docs / PyTorch PR #182293: from torch 2.13 torch.library.Library.impl overrides an earlier Python
    kernel (allow_override=True), where S's pinned torch ~2.10 refused the second one (S swallows the error,
    torch_mlir/operation_registry.py:136-146). So on the public beta's torch 2.13/2.14 the torch-mlir kernel
    wins each of the overloads S registers twice, as S's tests/python_ops/test_topk.py:55-87 expect, and its
    static arguments key the NEFF (`add`'s alpha: torch_mlir/ops/binary.py:8-9)."""
    assert inspect.signature(torch.library.Library.impl).parameters["allow_override"].default is True
    assert later_registration_wins(torch.__version__)
    new, old = load_policy("2.14.1"), load_policy("2.10.0")
    assert (new.winning_kernel("aten::topk"), old.winning_kernel("aten::topk")) == ("torch-mlir", "xla")
    assert (new.static_scalars("aten::add.Tensor"), old.static_scalars("aten::add.Tensor")) == (("alpha",), ())
    assert new.winning_kernel("aten::mm") is None  # registered once
    assert new.rule("aten::topk").native and old.rule("aten::topk").native  # the verdict is the same


def test_add_alpha_keys_the_neff_as_the_torch_mlir_kernel_does():
    """S: torch_mlir/ops/binary.py:8-9 registers add with alpha static, so each new alpha (SGD's
    `add_(grad, alpha=-lr)`) compiles its own NEFF; another `other` value does not."""
    x, y = torch.randn(3, 17, device=N), torch.randn(3, 17, device=N)
    before = torch.neuron.neff_cache_stats()["entries"]
    x.add(y, alpha=2.0), x.add(y, alpha=2.0), x.add(y, alpha=3.0)
    assert torch.neuron.neff_cache_stats()["entries"] == before + 2
    x.mul(2.0), x.mul(5.0)
    assert torch.neuron.neff_cache_stats()["entries"] == before + 3


def test_the_xla_kernels_input_checks_apply_only_where_it_wins():
    """S: python_ops/xla_ops/topk_xla.py:71-119 (last dim, largest=True, float, 0 < k <= size),
    xla_ops/fused_adamw_xla.py:123 (no GradScaler), xla_ops/arithmetic_xla.py:13-40 (no complex scalar):
    preconditions of the XLA kernels, which serve those ops only where the first registration wins
    (torch <= 2.12). On torch 2.13/2.14 the torch-mlir kernels take the same inputs, so topk off the last
    dimension, smallest first, on int32 runs natively here with no fallback."""
    old, new = load_policy("2.12.0"), load_policy(torch.__version__)
    assert {p.check for ops in old.preconditions.values() for p in ops} >= {"topk_xla", "fused_adamw_xla",
                                                                            "arithmetic_xla"}
    assert "topk" not in new.preconditions and "_fused_adamw_" not in new.preconditions
    x = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    call = {"self": x, "k": 2, "dim": 0, "largest": False}
    assert preconditions.evaluate("topk_xla", call).action == "reject"
    assert preconditions.evaluate("topk_xla", {"self": x.float(), "k": 2}) is None
    import torch_neuronx
    torch_neuronx.clear_op_tracking()
    values, indices = torch.topk(x.to(N), 2, dim=0, largest=False)
    assert torch.equal(values.cpu(), torch.topk(x, 2, dim=0, largest=False).values)
    assert torch_neuronx.get_fallback_ops() == [] and "aten::topk" in torch_neuronx.get_executed_ops()


def test_sdpa_on_float64_raises_and_the_audit_says_so():
    """S: python_ops/base.py:953-1010 (AttentionOpImpl.can_handle) and torch_mlir/ops/
    scaled_dot_product_attention.py:97-127 take float32, float16 and bfloat16 only; the CPU fallback that
    follows has no kernel for the device's fused op (torch raises for it off PrivateUse1), so a float64
    SDPA fails on the device. The audit flags it as a blocker; float32 runs."""
    q = torch.randn(1, 2, 4, 8, dtype=torch.float64)
    with pytest.raises(NotImplementedError, match=r"\[sdpa_dtype\]"):
        torch.nn.functional.scaled_dot_product_attention(q.to(N), q.to(N), q.to(N))
    assert torch.nn.functional.scaled_dot_product_attention(*(q.float().to(N),) * 3).shape == (1, 2, 4, 8)

    class Attend(nn.Module):
        def forward(self, x):
            return torch.nn.functional.scaled_dot_product_attention(x, x, x)

    report = audit(Attend(), torch.randn(1, 2, 4, 8, dtype=torch.float64))
    assert [f.category for f in report.findings if f.severity == "blocker"] == ["sdpa_dtype"]
    assert audit(Attend(), torch.randn(1, 2, 4, 8)).summary.blockers == []
