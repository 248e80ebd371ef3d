"""The first release's documented gaps: what the device does at run time, and strict mode (fidelity
audit rows 3 and 10). Source: S = parmoham-aws/test-repo-parmoham @ 98154b8."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from neuronkit.op_audit import audit
from neuronkit.policy import RUNTIMES, load_policy

N = "neuron"


def test_every_gap_states_where_it_is_documented_and_what_the_device_does():
    """data/op_support.toml: each gap carries `documented`, `runtime` and the runtime's source."""
    policy = load_policy()
    assert policy.gaps
    for category, rule in policy.gaps.items():
        assert rule.documented and rule.runtime in RUNTIMES and rule.source, category
        assert policy.remedies[category] and policy.severity[category] in ("blocker", "warn")
        assert (policy.severity[category] == "blocker") == (rule.runtime == "raise" or category == "sparse_embedding")


def test_neg_view_is_metadata_and_computes_negated():
    """S: torch_neuronx/csrc/core/NeuronBindings.cpp:205-208 (_neg_view, _conj, conj whitelisted as views)."""
    x = torch.randn(4)
    view = torch._neg_view(x.to(N))
    assert view.is_neg()
    torch.testing.assert_close((view + 0).cpu(), -x)
    torch.testing.assert_close(view.resolve_neg().cpu(), -x)


def test_signal_windows_decompose_into_device_ops():
    """S: no registration for the window ops (CompositeExplicitAutograd upstream): they decompose."""
    torch.testing.assert_close(torch.hann_window(8, device=N).cpu(), torch.hann_window(8))
    torch.testing.assert_close(torch.signal.windows.hann(8, device=N).cpu(), torch.signal.windows.hann(8))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_bilinear_and_bicubic_upsampling_fall_back_to_cpu(mode):
    """S: upsample_bilinear2d/bicubic2d unregistered → boxed CPU fallback
    (tests/pytorch_tests/specs/TestNNDeviceType.json xfails)."""
    import torch_neuronx
    torch_neuronx.clear_op_tracking()
    x = torch.randn(1, 1, 4, 4)
    got = F.interpolate(x.to(N), scale_factor=2, mode=mode)
    torch.testing.assert_close(got.cpu(), F.interpolate(x, scale_factor=2, mode=mode))
    assert f"aten::upsample_{mode}2d.out" in torch_neuronx.get_fallback_ops()  # the overload S's fallback sees


def test_dense_embedding_bag_is_not_sparse():
    """S: no sparse guard on embedding_bag; a dense EmbeddingBag runs (fidelity audit row 3)."""
    bag = nn.EmbeddingBag(10, 4, mode="sum")
    idx = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(bag.to(N)(idx.to(N)).cpu(), bag.to("cpu")(idx))


def test_sparse_embedding_is_found_by_a_forward_only_audit():
    """op_support.toml `sparse_embedding` (call rule `sparse_flag`): the sparse gradient only exists in
    backward, so the forward call with sparse=True is flagged; inferred from S's lack of sparse kernels."""
    report = audit(nn.Embedding(10, 4, sparse=True), (torch.tensor([[1, 2]]),))
    assert [b.category for b in report.summary.blockers] == ["sparse_embedding"]


def test_sparse_embedding_gradient_raises_on_the_device():
    """inferred: S registers no SparsePrivateUse1 kernels, so the sparse gradient cannot live on the device."""
    emb = nn.Embedding(10, 4, sparse=True).to(N)
    with pytest.raises(NotImplementedError, match=r"\[sparse\]"):
        emb(torch.tensor([1, 2], device=N)).sum().backward()


def test_contiguous_channels_last_raises():
    """S: torch_neuronx/python_ops/contiguous.py:107-109 → cast_policy.py:38-50."""
    x = torch.randn(1, 2, 3, 3, device=N)
    with pytest.raises(NotImplementedError, match=r"only support contiguous or preserve memory format.*\[channels_last\]"):
        x.contiguous(memory_format=torch.channels_last)
    assert x.contiguous().is_contiguous()


@pytest.mark.parametrize("layer", [nn.LSTM, nn.GRU])
def test_lstm_and_gru_fail_at_the_fused_cell(layer):
    """S: tests/pytorch_tests/specs/ddp_spec.json:95 ("Could not run 'aten::_thnn_fused_lstm_cell' with
    arguments from the 'CPU' backend"): upstream's cell calls the fused kernel on PrivateUse1."""
    with pytest.raises(NotImplementedError, match=r"_thnn_fused_(lstm|gru)_cell.*\[fused_rnn\]"):
        layer(4, 4).to(N)(torch.randn(3, 1, 4, device=N))


def test_rnn_tanh_decomposes_and_runs():
    """inferred: upstream's simple RNN cell is linear + tanh (no fused kernel), all native on the device."""
    rnn = nn.RNN(4, 4)
    x = torch.randn(3, 1, 4)
    torch.testing.assert_close(rnn.to(N)(x.to(N))[0].cpu(), rnn.to("cpu")(x)[0], atol=1e-5, rtol=1e-5)


def test_strict_mode_refuses_every_documented_gap_and_fallback(forked_python):
    """NEURONKIT_STRICT=1 (issue 10, deliverable 1): the conservative reading of the documented list."""
    proc = forked_python("""
        import torch, torch.nn.functional as F
        x = torch.randn(1, 1, 4, 4).to("neuron")
        for name, call in [("window", lambda: torch.hann_window(8, device="neuron")),
                           ("signal", lambda: torch.signal.windows.hann(8, device="neuron")),
                           ("neg", lambda: torch._neg_view(x)),
                           ("bilinear", lambda: F.interpolate(x, scale_factor=2, mode="bilinear")),
                           ("cumprod", lambda: torch.cumprod(x, 0))]:
            try:
                call()
                print(name, "ran")
            except (NotImplementedError, RuntimeError) as e:
                print(name, "refused", type(e).__name__, str(e).split(" [")[0][-40:])
    """, env={"NEURONKIT_STRICT": "1"})
    lines = proc.stdout.splitlines()
    assert len(lines) == 5 and all(" refused " in line for line in lines), proc.stdout


test_strict_mode_refuses_every_documented_gap_and_fallback = pytest.mark.subprocess(
    test_strict_mode_refuses_every_documented_gap_and_fallback)
