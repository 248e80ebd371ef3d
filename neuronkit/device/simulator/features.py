"""First-release gaps that do not reach the per-op kernel on their own.

The kernel stops blocked ops by name (data/op_support.toml), including those upstream implements as
composites (registration gives them a device kernel). Some features never arrive there as an op of
their own: Python-level entry points (forward-AD duals, torch.signal windows, NestedTensor
constructors), sparse layouts (their own dispatch key), and
SDPA, which is CompositeImplicitAutograd and would silently decompose with its mask. Each gets a guard
here that raises the same NotImplementedError the kernel raises (seed article: the release's "not
supported" list; behaviour doc §4).
"""

from __future__ import annotations

import functools
from typing import Callable

import torch
from torch.library import Library

from neuronkit.device.simulator import kernel, tracking
from neuronkit.device.simulator.kernel import raise_blocked
from neuronkit.policy import SDPA_CUSTOM_MASK, Policy, Rule

_LIBS: list[Library] = []
_NESTED_FACTORIES = ("nested_tensor", "as_nested_tensor", "nested_tensor_from_jagged", "narrow")
_FUSED_RNNS = ("lstm.input", "gru.input", "rnn_tanh.input", "rnn_relu.input")
_SIGNAL_WINDOWS = ("bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
                   "general_hamming", "hamming", "hann", "kaiser", "nuttall")


def install(policy: Policy) -> None:
    """Install the guards: sparse dispatch keys, SDPA masks, torch.signal windows."""
    sparse_rule = policy.rule("_sparse_coo_tensor_with_dims")
    generic = Library("_", "IMPL")
    _LIBS.append(generic)
    for key in ("SparsePrivateUse1", "SparseCsrPrivateUse1"):
        generic.fallback(_BlockedFallback(sparse_rule), key)
    sdpa = Library("aten", "IMPL")
    _LIBS.append(sdpa)
    guard = _SdpaMaskGuard(_sdpa_rule(policy))
    for key in ("AutogradPrivateUse1", "PrivateUse1"):
        sdpa.impl("scaled_dot_product_attention", guard, key)
    _guard_python_api(torch.signal.windows, _SIGNAL_WINDOWS, policy.rule("hann_window"), _device_kwarg_is_neuron)
    _guard_python_api(torch.nested, _NESTED_FACTORIES, policy.rule("_nested_tensor_from_tensor_list"), _any_neuron)
    _guard_python_api(torch.autograd.forward_ad, ("make_dual",), policy.rule("_make_dual"), _any_neuron)
    rnn = Library("aten", "IMPL")
    _LIBS.append(rnn)
    for name in _FUSED_RNNS:
        host = _HostRnn(getattr(torch.ops.aten, name.split(".")[0]).input, f"aten::{name.split('.')[0]}")
        for key in ("AutogradPrivateUse1", "PrivateUse1"):
            rnn.impl(name, host, key)


class _BlockedFallback:
    __slots__ = ("rule",)

    def __init__(self, rule: Rule) -> None:
        self.rule = rule

    def __call__(self, op: torch._ops.OpOverload, *args, **kwargs):
        raise_blocked(op._schema.name, self.rule)


def _sdpa_rule(policy: Policy) -> Rule:
    return Rule("scaled_dot_product_attention", SDPA_CUSTOM_MASK, blocked=True,
                feature=policy.features[SDPA_CUSTOM_MASK], remedy=policy.remedies[SDPA_CUSTOM_MASK])


class _SdpaMaskGuard:
    """SDPA on the device accepts no mask or a causal one. A mask that allows everything is no mask, and
    a mask that is exactly causal is what is_causal=True computes; any other mask raises. While tracing
    for torch.compile the mask has no values to inspect, so it is accepted there; eager runs and the op
    audit judge its values."""

    __slots__ = ("rule", "op")

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.op = torch.ops.aten.scaled_dot_product_attention.default

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                 enable_gqa=False):
        if attn_mask is not None and _has_values(attn_mask):
            kind = _mask_kind(attn_mask, query.shape[-2], key.shape[-2])
            if kind == "arbitrary":
                raise NotImplementedError(
                    "aten::scaled_dot_product_attention is not supported on the Neuron device with an arbitrary "
                    f"attn_mask (shape {tuple(attn_mask.shape)}): only no mask or a causal mask "
                    f"[{self.rule.category}]. {self.rule.remedy}")
            attn_mask, is_causal = None, is_causal or kind == "causal"
        return self.op.decompose(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                                 enable_gqa=enable_gqa)


def _has_values(mask: torch.Tensor) -> bool:
    return not (torch._subclasses.fake_tensor.is_fake(mask) or mask.device.type == "meta"
                or torch._C._functorch.is_functorch_wrapped_tensor(mask))


def _mask_kind(mask: torch.Tensor, q_len: int, k_len: int) -> str:
    """"none" (allows everything), "causal" (plain lower-triangular), or "arbitrary"."""
    host = mask.detach().to("cpu")
    if host.dtype is torch.bool:
        allowed = host
    else:  # additive mask: 0 where attention is allowed, -inf (or the dtype's minimum) elsewhere
        allowed = host == 0
        if not bool((allowed | (host <= torch.finfo(host.dtype).min / 2)).all()):
            return "arbitrary"
    if bool(allowed.all()):
        return "none"
    if q_len == k_len and bool((allowed == torch.ones(q_len, k_len, dtype=torch.bool).tril_()).all()):
        return "causal"
    return "arbitrary"


def _device_kwarg_is_neuron(args: tuple, kwargs: dict) -> bool:
    device = kwargs.get("device")
    return device is not None and torch.device(device).type == "neuron"


def _any_neuron(args: tuple, kwargs: dict) -> bool:
    if _device_kwarg_is_neuron(args, kwargs):
        return True
    for value in list(args) + list(kwargs.values()):
        items = value if isinstance(value, (list, tuple)) else (value,)
        if any(isinstance(v, torch.Tensor) and v.device.type == "neuron" for v in items):
            return True
    return False


def _guard_python_api(namespace, names: tuple[str, ...], rule: Rule, applies: Callable[[tuple, dict], bool]) -> None:
    """Wrap Python-level entry points (torch.signal.windows.*, torch.nested.*, forward_ad.make_dual)
    whose work never reaches the device kernel as one blocked op."""
    for name in names:
        original = getattr(namespace, name, None)
        if original is not None and not getattr(original, "_neuronkit_guard", False):
            setattr(namespace, name, _guard(original, rule, applies, f"{namespace.__name__}.{name}"))


def _guard(fn: Callable, rule: Rule, applies: Callable[[tuple, dict], bool], label: str) -> Callable:
    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        if applies(args, kwargs):
            raise_blocked(label, rule)
        return fn(*args, **kwargs)

    guarded._neuronkit_guard = True
    return guarded


class _HostRnn:
    """Fused LSTM/GRU/RNN cells have no Neuron lowering: the whole layer runs on the host, with its
    inputs and outputs copied across (differentiably), and is recorded as a CPU fallback."""

    __slots__ = ("op", "label")

    def __init__(self, op: torch._ops.OpOverload, label: str) -> None:
        self.op = op
        self.label = label

    def __call__(self, *args):
        tracking.fallback_ops.add(self.label)
        if kernel.STATE.strict:
            raise RuntimeError(f"CPU fallback is disabled for operation={self.label}: fused RNN cells have no native "
                               f"Neuron lowering (NEURONKIT_STRICT=1)")
        host = [_to(a, "cpu") for a in args]
        return tuple(_to(r, "neuron") for r in self.op(*host))


def _to(value, device: str):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value
