"""Attention as the device does it (fidelity audit row 1). Source: S = parmoham-aws/test-repo-parmoham @ 98154b8."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from neuronkit.op_audit import audit

N = "neuron"


def _qkv():
    torch.manual_seed(0)
    return [torch.randn(2, 4, 6, 8) for _ in range(3)]


@pytest.mark.parametrize("kind", ["additive random bias", "boolean mask", "broadcast bias"])
def test_sdpa_lowers_any_mask_forward_and_backward(kind):
    """S: torch_neuronx/csrc/aten/SdpBackendSelection.cpp:35-47 picks the overrideable fused kernel for
    every 4-D call; python_ops/torch_mlir/ops/scaled_dot_product_attention.py:63,229 adds the bias forward
    and backward; tests/python_ops/test_scaled_dot_product_attention.py:296-349 trains a random bias."""
    q, k, v = _qkv()
    mask = {"additive random bias": torch.randn(2, 4, 6, 6), "broadcast bias": torch.randn(1, 1, 6, 6),
            "boolean mask": torch.rand(6, 6) > 0.3}[kind]
    mask[..., 0] = True if mask.dtype is torch.bool else mask[..., 0]
    grad_mask = mask.is_floating_point()
    cpu = [t.clone().requires_grad_() for t in (q, k, v)] + [mask.clone().requires_grad_(grad_mask)]
    dev = [t.to(N).requires_grad_() for t in (q, k, v)] + [mask.to(N).requires_grad_(grad_mask)]
    expected = F.scaled_dot_product_attention(*cpu[:3], attn_mask=cpu[3])
    got = F.scaled_dot_product_attention(*dev[:3], attn_mask=dev[3])
    expected.square().sum().backward()
    got.square().sum().backward()
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)
    for d, c in zip(dev, cpu):
        if c.requires_grad:
            torch.testing.assert_close(d.grad.cpu(), c.grad, atol=1e-4, rtol=1e-4)


def test_sdpa_runs_the_devices_fused_kernel():
    """S: SdpBackendSelection.cpp:35-47 (4-D → `_scaled_dot_product_fused_attention_overrideable`)."""
    import torch_neuronx
    torch_neuronx.clear_op_tracking()
    q, k, v = (t.to(N) for t in _qkv())
    F.scaled_dot_product_attention(q, k, v, attn_mask=torch.zeros(6, 6, device=N))
    assert "aten::_scaled_dot_product_fused_attention_overrideable" in torch_neuronx.get_executed_ops()
    assert not torch_neuronx.get_fallback_ops()


def _fast_path_mha():
    return nn.MultiheadAttention(8, 2, batch_first=True).eval().to(N)


@pytest.mark.parametrize("call, category", [
    ({"attn_mask": torch.zeros(5, 5, dtype=torch.bool), "need_weights": False}, "mha_mask"),
    ({}, "mha_need_weights"),
])
def test_mha_fast_path_raises_for_a_mask_and_for_weights(call, category):
    """S: torch_neuronx/python_ops/native_multi_head_attention.py:77-88,128-134 raises for any mask tensor
    and for need_weights=True (nn.MultiheadAttention's default)."""
    mha, x = _fast_path_mha(), torch.randn(1, 5, 8, device=N)
    call = {k: v.to(N) if isinstance(v, torch.Tensor) else v for k, v in call.items()}
    with torch.no_grad(), pytest.raises(NotImplementedError, match=rf"_native_multi_head_attention.*\[{category}\]"):
        mha(x, x, x, **call)


def test_mha_fast_path_runs_without_mask_or_weights():
    """S: native_multi_head_attention.py:90-126 (prefix, mid, suffix ops) for mask=None, need_weights=False."""
    mha, x = _fast_path_mha(), torch.randn(1, 5, 8)
    with torch.no_grad():
        expected = mha.to("cpu")(x, x, x, need_weights=False)[0]
        got = mha.to(N)(*[x.to(N)] * 3, need_weights=False)[0]
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)


class _Block(nn.Module):
    def __init__(self, mask: torch.Tensor | None) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)
        self.mask = mask

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mha(x, x, x, attn_mask=self.mask, need_weights=False)[0]


def test_the_audit_sees_the_mha_fast_path_as_the_device_takes_it():
    """S: native_multi_head_attention.py:77-82: in eval mode without grad, nn.MultiheadAttention takes its
    fast path on the device (`_native_multi_head_attention`), which raises for a mask; the audit records
    the same call (a blocker naming the layer), and the call without a mask as native."""
    masked = audit(_Block(torch.zeros(5, 5, dtype=torch.bool)).eval(), torch.randn(1, 5, 8))
    assert [f.module_paths for f in masked.findings_in("mha_mask")] == [["mha"]]
    clean = audit(_Block(None).eval(), torch.randn(1, 5, 8))
    assert clean.summary.blockers == []
    assert clean.op("aten::_native_multi_head_attention").classification == "native"


def _tiny(name: str):
    import transformers
    common = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, head_dim=8)
    configs = {
        "llama (padded batch)": lambda: transformers.LlamaConfig(**common),
        "mistral (sliding window)": lambda: transformers.MistralConfig(**common, sliding_window=4),
        "gemma3 (sliding window)": lambda: transformers.Gemma3TextConfig(
            **common, sliding_window=4, layer_types=["sliding_attention", "full_attention"]),
        "mixtral (MoE router)": lambda: transformers.MixtralConfig(**common, num_local_experts=4,
                                                                   num_experts_per_tok=2),
        "qwen3-moe (MoE router)": lambda: transformers.Qwen3MoeConfig(
            **common, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, mlp_only_layers=[]),
    }
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(configs[name](), attn_implementation="sdpa").eval()


HF_CASES = ["llama (padded batch)", "mistral (sliding window)", "gemma3 (sliding window)", "mixtral (MoE router)",
            "qwen3-moe (MoE router)"]


@pytest.mark.parametrize("name", HF_CASES)
def test_hf_padded_and_sliding_window_batches_run_and_match_cpu(name, monkeypatch):
    """S: SdpBackendSelection.cpp:35-47 (masked SDPA lowers; right-padded, see the left-padded test below) and python_ops/torch_mlir/ops/misc.py:86-130
    (histc lowers for any dtype: transformers' MoE routers call it on int32 off CPU). The MoE experts'
    unaligned grouped matmuls are let through with TORCH_NEURONX_SKIP_OP_PRECONDITIONS=1 (utils.py:128-134;
    test_preconditions.py has the refusal)."""
    if "MoE" in name:
        monkeypatch.setenv("TORCH_NEURONX_SKIP_OP_PRECONDITIONS", "1")
    model = _tiny(name)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 0, 0], [1, 2, 3, 4, 5, 6, 7, 8]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0, 0], [1] * 8])  # right padding: no query row is fully masked
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask).logits
        got = model.to(N)(input_ids=ids.to(N), attention_mask=mask.to(N)).logits
    torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["llama (padded batch)", "mistral (sliding window)"])
def test_audit_finds_no_blocker_in_masked_attention(name):
    """S: SdpBackendSelection.cpp:35-47: a masked 4-D SDPA is the native fused kernel, not a blocker."""
    report = audit(_tiny(name), {"input_ids": torch.tensor([[5, 6, 7, 0]]),
                                 "attention_mask": torch.tensor([[1, 1, 1, 0]])})
    assert report.summary.blockers == []
    assert report.op("aten::_scaled_dot_product_fused_attention_overrideable").classification == "native"


def test_a_fully_masked_row_is_nan_as_in_the_source():
    """S: python_ops/torch_mlir/ops/scaled_dot_product_attention.py:67-72 (max_logits = max(logits),
    exp(logits - max_logits)): a query row whose keys are all masked is -inf - -inf, NaN, in the output and
    the log-sum-exp; PyTorch's own kernels give zeros there (_safe_softmax). The other rows are unchanged."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 8, generator=g) for _ in range(3))
    allowed = torch.ones(4, 4, dtype=torch.bool).tril()
    allowed[0] = False  # row 0: every key masked (a left-padded position)
    out, lse = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        q.to(N), k.to(N), v.to(N), allowed.to(N), 0.0, False)[:2]
    want_out, want_lse = _s_compute_attention(q, k, v, 8 ** -0.5, allowed)
    assert want_out[:, :, 0].isnan().all() and out.cpu()[:, :, 0].isnan().all() and lse.cpu()[:, :, 0].isnan().all()
    torch.testing.assert_close(out.cpu(), want_out, rtol=1e-6, atol=1e-6, equal_nan=True)
    torch.testing.assert_close(lse.cpu(), want_lse, rtol=0, atol=1e-6, equal_nan=True)
    public = F.scaled_dot_product_attention(q.to(N), k.to(N), v.to(N), attn_mask=allowed.to(N))
    assert public.cpu()[:, :, 0].isnan().all() and not public.cpu()[:, :, 1:].isnan().any()
    assert not F.scaled_dot_product_attention(q, k, v, attn_mask=allowed).isnan().any()  # the CPU: zeros


LEFT = {"input_ids": torch.tensor([[0, 0, 5, 6, 7], [1, 2, 3, 4, 5]]),
        "attention_mask": torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])}
RIGHT = {"input_ids": torch.tensor([[5, 6, 7, 0, 0], [1, 2, 3, 4, 5]]),
         "attention_mask": torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])}


def test_a_left_padded_batch_gives_nan_logits_for_the_padded_sequence():
    """S: scaled_dot_product_attention.py:67-72 on every layer (the fidelity review's repro/r1, a tiny
    2-layer Llama with GQA): the pad positions' rows are NaN, and at the next layer 0 x NaN reaches every
    real token of the padded sequence; the unpadded sequence matches the CPU. Right padding leaves no row
    fully masked: the whole batch matches the CPU."""
    model = _tiny("llama (padded batch)")
    with torch.no_grad():
        cpu = {name: model(**batch).logits for name, batch in (("left", LEFT), ("right", RIGHT))}
        model.to(N)
        dev = {name: model(**{k: v.to(N) for k, v in batch.items()}).logits.cpu()
               for name, batch in (("left", LEFT), ("right", RIGHT))}
    assert dev["left"][0].isnan().all()  # the padded sequence, real tokens included
    torch.testing.assert_close(dev["left"][1], cpu["left"][1], atol=1e-4, rtol=1e-4)
    assert not cpu["left"].isnan().any()
    torch.testing.assert_close(dev["right"], cpu["right"], atol=1e-4, rtol=1e-4)


def test_the_audit_names_a_fully_masked_row_with_its_remedy():
    """S: scaled_dot_product_attention.py:67-72 (fidelity review §5.1): a run whose attention mask has a
    fully masked row is a blocker on the SDPA call sites, with the remedy (right padding, or a finite mask
    value); a right-padded batch has none. A weightless audit (fake tensors) cannot see mask values."""
    model = _tiny("llama (padded batch)")
    left = audit(model, LEFT)
    (finding,) = left.findings_in("sdpa_fully_masked_row")
    assert finding.severity == "blocker" and finding.op == "aten::_scaled_dot_product_fused_attention_overrideable"
    assert finding.module_paths == ["model.layers.0.self_attn", "model.layers.1.self_attn"]
    assert "padding_side" in finding.remedy and "finfo" in finding.remedy and "NaN" in finding.message
    right = audit(model, RIGHT)
    assert right.findings_in("sdpa_fully_masked_row") == [] and right.summary.blockers == []


def test_batched_generation_is_a_finding():
    """S: scaled_dot_product_attention.py:67-72: batched generate() pads prompts of different lengths on the
    left, where the device's attention gives NaN; an audit with generate=True on a batch of more than one
    prompt says so (a warning on the SDPA calls inside generate()), a single prompt does not."""
    model = _tiny("llama (padded batch)")
    batch = audit(model, {"input_ids": torch.tensor([[1, 2, 3], [4, 5, 6]])}, generate=True, max_new_tokens=2)
    (finding,) = batch.findings_in("sdpa_batched_generation")
    assert finding.severity == "warn" and "eager" in finding.remedy
    single = audit(model, {"input_ids": torch.tensor([[1, 2, 3]])}, generate=True, max_new_tokens=2)
    assert single.findings_in("sdpa_batched_generation") == []


def _s_compute_attention(q, k, v, scale, mask):
    """S python_ops/torch_mlir/ops/scaled_dot_product_attention.py compute_attention, for float32 inputs."""
    logits = (q @ k.transpose(-2, -1)) * scale + torch.where(mask, 0.0, float("-inf"))
    max_logits = torch.max(logits, dim=-1, keepdim=True)[0]
    exp_logits = torch.exp(logits - max_logits)
    sum_exp = torch.sum(exp_logits, dim=-1, keepdim=True)
    return (exp_logits / sum_exp) @ v, max_logits.squeeze(-1) + torch.log(sum_exp.squeeze(-1))


def test_the_fused_kernel_computes_the_softmax_as_the_device_does():
    """S: python_ops/torch_mlir/ops/scaled_dot_product_attention.py compute_attention (probabilities are
    exp(x - max) / sum, lse = max + log(sum)); logits a mask sets to -inf give exactly zero."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 16, 8, generator=g) * 4 for _ in range(3))
    causal = torch.ones(16, 16, dtype=torch.bool).tril()
    out, lse = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        q.to(N), k.to(N), v.to(N), None, 0.0, True)[:2]
    want_out, want_lse = _s_compute_attention(q, k, v, 8 ** -0.5, causal)
    torch.testing.assert_close(lse.cpu(), want_lse, rtol=0, atol=1e-6)
    torch.testing.assert_close(out.cpu(), want_out, rtol=1e-6, atol=1e-6)
    first = F.scaled_dot_product_attention(q[:, :, :1].to(N), k.to(N), v.to(N), is_causal=True)
    assert torch.equal(first.cpu(), v[:, :, :1])  # one allowed key: probability exactly 1, the rest 0


@pytest.mark.parametrize("enable_gqa", [False, True])
@pytest.mark.parametrize("kv_heads", [1, 2])
def test_sdpa_repeats_fewer_kv_heads_and_sums_their_gradients(kv_heads, enable_gqa):
    """S: python_ops/torch_mlir/ops/scaled_dot_product_attention.py:147-151 and :348-352 repeat the key and
    value heads when they are fewer than the query's (multi-query and grouped-query attention, e.g.
    Falcon's single KV head, without `enable_gqa`), and :382-389 sum their gradients back per KV head."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, kv_heads, 6, 8), torch.randn(2, kv_heads, 6, 8)
    cpu = [t.clone().requires_grad_() for t in (q, k, v)]
    dev = [t.to(N).requires_grad_() for t in (q, k, v)]
    repeat = 4 // kv_heads
    expected = F.scaled_dot_product_attention(cpu[0], cpu[1].repeat_interleave(repeat, 1),
                                              cpu[2].repeat_interleave(repeat, 1), is_causal=True)
    got = F.scaled_dot_product_attention(*dev, is_causal=True, enable_gqa=enable_gqa)
    expected.square().sum().backward()
    got.square().sum().backward()
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)
    for d, c in zip(dev, cpu):
        assert d.grad.shape == c.shape
        torch.testing.assert_close(d.grad.cpu(), c.grad, atol=1e-4, rtol=1e-4)
