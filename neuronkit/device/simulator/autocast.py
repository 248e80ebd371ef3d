"""AutocastPrivateUse1 as the real backend registers it: PyTorch's full CUDA-style op lists (lower
precision, fp32, fp32 with a dtype, promote) and `binary_cross_entropy` banned (S:
torch_neuronx/csrc/amp/autocast_mode.cpp). The lists live in data/op_support.toml `[autocast]`."""

from __future__ import annotations

import torch
from torch.library import Library

_LIBS: list[Library] = []
_AUTOCAST_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)


class _Cast:
    """One AutocastPrivateUse1 kernel: cast floating device tensors per the policy, run below autocast."""

    __slots__ = ("op", "policy")

    def __init__(self, op: torch._ops.OpOverload, policy: str) -> None:
        self.op = op
        self.policy = policy  # lower_precision_fp | fp32 | promote

    def __call__(self, *args, **kwargs):
        if self.policy == "promote":
            dtype = _widest(list(args) + list(kwargs.values()))
        elif self.policy == "lower_precision_fp":
            dtype = torch.get_autocast_dtype("neuron")
        else:
            dtype = torch.float32
        if dtype is not None:
            promote = self.policy == "promote"
            args = tuple(_cast(a, dtype, promote) for a in args)
            kwargs = {k: _cast(v, dtype, promote) for k, v in kwargs.items()}
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_KEYS):
            return self.op(*args, **kwargs)


class _Banned:
    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def __call__(self, *args, **kwargs):
        raise RuntimeError(self.message)


def _eligible(value, promote: bool) -> bool:
    """Upstream's is_autocast_eligible: a floating device tensor (float64 only when promoting)."""
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.device.type == "neuron" and (
        promote or value.dtype is not torch.float64)


def _cast(value, dtype: torch.dtype, promote: bool):
    if _eligible(value, promote):
        return value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype, promote) for v in value)
    return value


def _widest(values: list) -> torch.dtype | None:
    """The promote policy's target: the widest floating dtype among the arguments."""
    dtypes = [v.dtype for v in values if _eligible(v, True)]
    return max(dtypes, key=lambda d: torch.finfo(d).bits) if dtypes else None


def _overloads(entry: str) -> list[tuple[str, torch._ops.OpOverload]]:
    name, _, overload = entry.partition(".")
    packet = getattr(torch.ops.aten, name, None)
    if packet is None or (overload or "default") not in packet.overloads():
        return []
    return [(entry if overload else name, getattr(packet, overload or "default"))]


def install(table: dict) -> None:
    """Register the fallthrough and the policy kernels from `[autocast]` of the op-support table."""
    generic = Library("_", "IMPL")
    _LIBS.append(generic)
    generic.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    lib = Library("aten", "IMPL")
    _LIBS.append(lib)
    for policy, key in (("lower_precision_fp", "lower_precision_fp"), ("fp32", "fp32"),
                        ("fp32", "fp32_set_opt_dtype"), ("promote", "promote")):
        for entry in table[key]:
            for name, op in _overloads(entry):
                lib.impl(name, _Cast(op, policy), "AutocastPrivateUse1")
    for entry in table["banned"]:
        lib.impl(entry, _Banned(table["banned_message"]), "AutocastPrivateUse1")
