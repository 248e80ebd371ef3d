"""Input preconditions of registered ops (S's `can_handle`, neuronkit/preconditions.py): `_grouped_mm`'s
alignment check, the variables that steer it, and input-dependent CPU fallbacks.
Source: S = parmoham-aws/test-repo-parmoham @ 98154b8."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch_neuronx
from neuronkit.op_audit import audit

N = "neuron"


def _gmm(t: int, offs: list[int], groups: int = 4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A 2-D x 3-D grouped matmul's inputs as transformers' MoE experts pass them: tokens (t, 8), one
    (8, 16) weight per expert, cumulative int32 group ends."""
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(t, 8, generator=gen), torch.randn(groups, 8, 16, generator=gen),
            torch.tensor(offs, dtype=torch.int32))


@pytest.mark.parametrize("t, offs, message", [
    (48, [13, 25, 37, 48], "t must be divisible by 128"),
    (256, [60, 130, 200, 256], "offs must be divisible by 128"),
    (256, [128, 384, 384, 384], "offs must be between 0 and 256"),
    (256, [128, 0, 256, 256], "offs must be sorted"),
])
def test_unaligned_grouped_mm_raises_s_value_error(t, offs, message):
    """S: python_ops/grouped_mm.py:12-24 (validate_offs) from can_handle :50-51 (2-D x 3-D), called by
    base.py:720-721 outside any try: the user gets S's ValueError."""
    a, b, o = _gmm(t, offs)
    with pytest.raises(ValueError, match=f"^{message}$"):
        torch._grouped_mm(a.to(N), b.to(N), offs=o.to(N))


def test_aligned_grouped_mm_runs_natively_and_matches_cpu():
    """S: aligned offsets pass validate_offs (grouped_mm.py:12-24) and the MLIR implementation runs
    (tests/python_ops/test_grouped_mm.py uses only aligned offsets)."""
    a, b, o = _gmm(256, [128, 128, 256, 256])
    torch_neuronx.clear_op_tracking()
    got = torch._grouped_mm(a.to(N), b.to(N), offs=o.to(N))
    torch.testing.assert_close(got.cpu(), torch._grouped_mm(a, b, offs=o))
    assert "aten::_grouped_mm" in torch_neuronx.get_executed_ops()
    assert torch_neuronx.get_fallback_ops() == []


def test_2d_x_2d_grouped_mm_checks_the_inner_dimension_at_128(monkeypatch):
    """S: grouped_mm.py:31-32: the NKI 2-D x 2-D implementation validates offs against a.shape[1] at a
    fixed 128 (TORCH_NEURONX_ATEN_GMM_ALIGN does not apply to it)."""
    monkeypatch.setenv("TORCH_NEURONX_ATEN_GMM_ALIGN", "8")
    a, b = torch.randn(4, 64), torch.randn(64, 8)
    with pytest.raises(ValueError, match="^t must be divisible by 128$"):
        torch._grouped_mm(a.to(N), b.to(N), offs=torch.tensor([32, 64], dtype=torch.int32).to(N))


def test_alignment_and_skip_variables(monkeypatch):
    """S: torch_neuronx/utils.py:119-134: TORCH_NEURONX_ATEN_GMM_ALIGN sets the 2-D x 3-D alignment;
    TORCH_NEURONX_SKIP_OP_PRECONDITIONS=1 skips validate_offs (grouped_mm.py:14-15)."""
    a, b, o = _gmm(48, [16, 24, 40, 48])
    expected = torch._grouped_mm(a, b, offs=o)
    monkeypatch.setenv("TORCH_NEURONX_ATEN_GMM_ALIGN", "8")
    torch.testing.assert_close(torch._grouped_mm(a.to(N), b.to(N), offs=o.to(N)).cpu(), expected)
    monkeypatch.setenv("TORCH_NEURONX_ATEN_GMM_ALIGN", "16")
    with pytest.raises(ValueError, match="^offs must be divisible by 16$"):
        torch._grouped_mm(a.to(N), b.to(N), offs=o.to(N))
    monkeypatch.setenv("TORCH_NEURONX_SKIP_OP_PRECONDITIONS", "1")
    torch.testing.assert_close(torch._grouped_mm(a.to(N), b.to(N), offs=o.to(N)).cpu(), expected)


def test_ranks_no_implementation_takes_fall_back_or_raise(monkeypatch):
    """S: base.py:715-804: a 3-D x 3-D grouped matmul matches neither implementation's can_handle
    (grouped_mm.py:31-32,50-51): a release build runs it on the CPU and logs it as offloaded
    (base.py:820-829); TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 raises S's message."""
    from neuronkit.device.simulator import tracking
    a, b = torch.randn(2, 4, 8), torch.randn(2, 8, 16)
    torch_neuronx.clear_op_tracking()
    events = []
    tracking.observers.append(events.append)
    try:
        got = torch._grouped_mm(a.to(N), b.to(N))
    finally:
        tracking.observers.remove(events.append)
    torch.testing.assert_close(got.cpu(), torch._grouped_mm(a, b))
    assert torch_neuronx.get_fallback_ops() == ["aten::_grouped_mm"]
    assert "3-D x 3-D" in tracking.get_input_fallbacks()["aten::_grouped_mm"]
    assert [(e.fallback, e.category, e.cache_key) for e in events] == [(True, "input_fallback", None)]
    monkeypatch.setenv("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", "1")
    with pytest.raises(RuntimeError, match="^CPU fallback disabled because TORCH_NEURONX_FALLBACK_ONLY_FOR_"
                                           "UNIMPLEMENTED_OPS=1. Operation _grouped_mm failed to be handled"):
        torch._grouped_mm(a.to(N), b.to(N))


class _Experts(nn.Module):
    """A grouped-matmul MoE layer: tokens sorted by expert, cumulative group ends as offsets."""

    def __init__(self, counts: list[int]) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(len(counts), 8, 8))
        self.register_buffer("offs", torch.tensor(counts, dtype=torch.int32).cumsum(0, dtype=torch.int32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch._grouped_mm(x, self.weight, offs=self.offs)


def test_the_audit_reports_unaligned_grouped_mm_as_a_blocker_naming_the_layer():
    """S: grouped_mm.py:12-24: the audit evaluates the same precondition on the recorded call, so an
    unaligned MoE layer is a blocker with its module path; with real values an aligned one is ready."""
    model = nn.Sequential(nn.Linear(8, 8), _Experts([13, 12, 12, 11]))
    report = audit(model, torch.randn(48, 8))
    found = report.findings_in("grouped_mm_alignment")
    assert found and found[0].module_paths == ["1"] and "TOKEN_GROUP_ALIGN_SIZE_M" in found[0].remedy
    assert report.summary.blockers[0].category == "grouped_mm_alignment"
    aligned = audit(nn.Sequential(nn.Linear(8, 8), _Experts([128, 0, 128, 0])), torch.randn(256, 8))
    assert aligned.summary.blockers == [] and not aligned.findings_in("grouped_mm_alignment")


def test_compiled_grouped_mm_computes_as_s_compile_path_does(fresh_dynamo):
    """S: neuron_dynamo_backend/decompositions.py:1475-1497: torch.compile asks no can_handle and
    decomposes a 2-D x 3-D `_grouped_mm` into blocks of TORCH_NEURONX_ATEN_GMM_ALIGN rows, one expert per
    block: exact for aligned groups, wrong numbers for unaligned ones, a reshape error below 128 tokens."""
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(256, 8, generator=gen).bfloat16(), torch.randn(4, 8, 16, generator=gen).bfloat16()
    compiled = torch.compile(lambda a, b, o: torch._grouped_mm(a, b, offs=o), backend="neuron")
    for offs, exact in (([128, 128, 256, 256], True), ([60, 130, 200, 256], False)):
        o = torch.tensor(offs, dtype=torch.int32)
        got = compiled(a.to(N), b.to(N), o.to(N)).cpu()
        assert torch.equal(got, torch._grouped_mm(a, b, offs=o)) is exact, offs
    with pytest.raises(Exception, match=r"shape '\[0, 128, 8\]' is invalid"):
        compiled(a[:48].to(N), b.to(N), torch.tensor([13, 25, 37, 48], dtype=torch.int32).to(N))
