"""Device behaviours that do not reach the per-op kernel as one op of their own.

The kernel applies the policy by op name (data/op_support.toml). Some behaviours need a registration
elsewhere: sparse layouts (their own dispatch key), Python-level entry points (forward-AD duals,
NestedTensor constructors, torch.signal windows under NEURONKIT_STRICT=1), composite ops the real
backend registers itself (SDPA's backend choice, `record_stream`), and
`_has_compatible_shallow_copy_type`, which keeps tied weights tied across `.to('neuron')`.
"""

from __future__ import annotations

import functools
from typing import Callable

import torch
from torch.library import Library

from neuronkit.device.simulator import device_ops, kernel, native
from neuronkit.device.simulator.kernel import raise_blocked
from neuronkit.policy import Policy, Rule

_LIBS: list[Library] = []
_NESTED_FACTORIES = ("nested_tensor", "as_nested_tensor", "nested_tensor_from_jagged", "narrow")
_SIGNAL_WINDOWS = ("bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
                   "general_hamming", "hamming", "hann", "kaiser", "nuttall")


def install(policy: Policy) -> None:
    """Install the registrations: sparse dispatch keys, SDPA, shallow-copy compatibility and
    the Python-level guards of gaps the device raises for (all documented gaps under strict mode)."""
    strict = kernel.STATE.strict
    sparse_rule = policy.rule("_sparse_coo_tensor_with_dims")
    generic = Library("_", "IMPL")
    _LIBS.append(generic)
    for key in ("SparsePrivateUse1", "SparseCsrPrivateUse1"):
        generic.fallback(_BlockedFallback(sparse_rule), key)
    aten = Library("aten", "IMPL")
    _LIBS.append(aten)
    native.install_sdpa_router()  # SDPA's backend choice (csrc/attention.cpp `sdpa_router`)
    aten.impl("_has_compatible_shallow_copy_type", device_ops.has_compatible_shallow_copy_type, "PrivateUse1")
    # S registers record_stream for PrivateUse1 itself (csrc/core/NeuronBindings.cpp:442): its own kernel,
    # not the per-op kernel's (which has no CPU kernel to run for it).
    aten.impl("record_stream", device_ops.record_stream, "PrivateUse1")
    guards = ((torch.signal.windows, _SIGNAL_WINDOWS, policy.rule("hann_window"), _device_kwarg_is_neuron),
              (torch.nested, _NESTED_FACTORIES, policy.rule("_nested_tensor_from_tensor_list"), _any_neuron),
              (torch.autograd.forward_ad, ("make_dual",), policy.rule("_make_dual"), _any_neuron))
    for namespace, names, rule, applies in guards:
        if rule.blocked or strict:
            _guard_python_api(namespace, names, rule, applies)


class _BlockedFallback:
    __slots__ = ("rule",)

    def __init__(self, rule: Rule) -> None:
        self.rule = rule

    def __call__(self, op: torch._ops.OpOverload, *args, **kwargs):
        raise_blocked(op._schema.name, self.rule)


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
