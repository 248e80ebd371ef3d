"""Host implementations of the ops whose device kernel differs from CPU's.

The per-op kernel normally runs CPU's kernel for an op on CPU aliases of the device tensors. For the ops
here the real backend's kernel behaves differently from CPU's (it raises where CPU runs, or runs where
CPU has no kernel for the dtype), so the kernel runs these functions instead. Each is small, takes and
returns CPU tensors, and cites the snapshot path (parmoham-aws/test-repo-parmoham @ 98154b8) it models,
so it can be ported to the C++ kernel as it is.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

_aten = torch.ops.aten


def histc(input: torch.Tensor, bins: int = 100, min: float = 0, max: float = 0) -> torch.Tensor:
    """`aten::histc` for every dtype, as the device's lowering computes it (linear bin index, clamped,
    counted in the input's dtype; `python_ops/torch_mlir/ops/misc.py::torch_histc`). CPU's kernel has
    no integer version, which transformers' MoE routers hit (`torch.histc` on int32 off CPU)."""
    if input.is_floating_point():
        return _aten.histc.default(input, bins, min, max)
    lo, hi = float(min), float(max)
    if lo == 0.0 and hi == 0.0 and input.numel() > 0:
        lo, hi = float(input.min()), float(input.max())
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    data = input.flatten().double()
    index = ((data - lo) * bins / (hi - lo)).to(torch.int32).clamp_(0, bins - 1)
    in_range = (data >= lo) & (data <= hi)
    matches = (index.unsqueeze(1) == torch.arange(bins, dtype=torch.int32).unsqueeze(0)) & in_range.unsqueeze(1)
    return matches.sum(dim=0, dtype=input.dtype)


def _attention_logits(query, key, attn_bias, is_causal: bool, scale: float | None) -> torch.Tensor:
    """Scaled logits in float32 with the causal mask or the additive bias, as the device's decomposition
    (`python_ops/torch_mlir/ops/scaled_dot_product_attention.py::compute_attention`): causal wins over
    a bias; a boolean bias is an allow-mask."""
    scale = scale if scale is not None else 1.0 / math.sqrt(query.size(-1))
    logits = (query @ key.transpose(-2, -1)).float() * scale
    if is_causal:
        allowed = torch.ones(query.size(-2), key.size(-2), dtype=torch.bool).tril_()
        logits = logits.masked_fill(~allowed, float("-inf"))
    elif attn_bias is not None and attn_bias.numel() > 0:
        if attn_bias.dtype is torch.bool:
            logits = logits.masked_fill(~attn_bias, float("-inf"))
        else:
            logits = logits + attn_bias.float()
    return logits


def _probabilities(logits: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """Softmax from the log-sum-exp. A row with every key masked (a left-padded query) gets zeros, as
    PyTorch's `_safe_softmax` gives; S's decomposition would give NaN there (exp(-inf - -inf)): not
    verified on hardware, listed as a known difference in docs/fidelity.md."""
    probs = torch.exp(logits - lse.unsqueeze(-1))
    return probs.masked_fill_(torch.isneginf(lse).unsqueeze(-1), 0.0)


def _like(layout: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """`values` in `layout`'s dtype and memory layout, as the op's meta kernel promises (a traced graph
    views the output on that assumption)."""
    return torch.empty_like(layout).copy_(values)


def fused_attention(query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False,
                    *, scale=None):
    """`aten::_scaled_dot_product_fused_attention_overrideable`: SDPA's device kernel for 4-D inputs, with
    no mask, a causal mask, or any boolean/additive mask (`csrc/aten/SdpBackendSelection.cpp:35-47`).
    Dropout is applied when asked; SDPA calls with dropout take the math path instead (features.py), so
    that the backward replays the mask."""
    logits = _attention_logits(query, key, attn_bias, is_causal, scale)
    lse = torch.logsumexp(logits, dim=-1)
    probs = _probabilities(logits, lse)
    if dropout_p > 0.0:
        probs = torch.nn.functional.dropout(probs, dropout_p)
    output = _like(query, probs.to(query.dtype) @ value)
    empty = torch.empty(0, dtype=torch.int32)
    return (output, lse, empty, empty.clone(), query.size(-2), key.size(-2), torch.empty(0, dtype=torch.int64),
            torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=query.dtype))


def fused_attention_backward(grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q,
                             cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *,
                             scale=None):
    """`aten::_scaled_dot_product_fused_attention_overrideable_backward`: the softmax-attention gradients
    of the forward above for query, key, value and the additive bias (`scaled_dot_product_attention.py:229`; S's tests train a
    random bias, `tests/python_ops/test_scaled_dot_product_attention.py:296-349`)."""
    scale = scale if scale is not None else 1.0 / math.sqrt(query.size(-1))
    probs = _probabilities(_attention_logits(query, key, attn_bias, is_causal, scale), logsumexp)
    grad_out = grad_out.float()
    grad_value = probs.transpose(-2, -1) @ grad_out
    grad_probs = grad_out @ value.float().transpose(-2, -1)
    grad_logits = probs * (grad_probs - (grad_probs * probs).sum(-1, keepdim=True))
    grad_query = (grad_logits @ key.float()) * scale
    grad_key = (grad_logits.transpose(-2, -1) @ query.float()) * scale
    if attn_bias is not None and attn_bias.numel() > 0 and attn_bias.is_floating_point() and not is_causal:
        grad_bias = grad_logits.sum_to_size(attn_bias.shape).to(attn_bias.dtype)
    else:
        grad_bias = torch.empty(0, dtype=query.dtype)
    return (_like(query, grad_query), _like(key, grad_key), _like(value, grad_value), grad_bias)


# Overload name -> host implementation, read by the per-op kernel.
HOST_IMPLS: dict[str, Callable] = {
    "aten::histc": histc,
    "aten::_scaled_dot_product_fused_attention_overrideable": fused_attention,
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": fused_attention_backward,
}


def has_compatible_shallow_copy_type(self: torch.Tensor, src: torch.Tensor) -> bool:
    """`aten::_has_compatible_shallow_copy_type` for the device: CPU and neuron tensors can share a
    TensorImpl's metadata (`csrc/aten/NeuronNativeFunctions.cpp:364-377`), so `module.to('neuron')`
    moves parameters in place (tied weights stay tied) and `param.data = neuron_tensor` works."""
    a, b = self.device.type, src.device.type
    return a == b or {a, b} == {"cpu", "neuron"}
