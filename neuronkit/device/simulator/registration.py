"""Install the simulated `neuron` device into this process's PyTorch.

What this reproduces, from behaviour doc §1: the PrivateUse1 backend renamed `neuron`, `torch.neuron`
as its device module, `tensor.neuron()` / `module.neuron()`, `torch.accelerator` integration, a
`torch_neuronx` module with op tracking; from §2: a per-op kernel for every ATen op plus a boxed
fallback; from §5: AutocastPrivateUse1 with upstream's lists (autocast.py). The mechanics follow
shared/design/simulated-device.md (approach A2): real PrivateUse1 tensors over CPU memory. The device
guard, hooks, generators and allocators are native (csrc/, built by setup.py), as in PyTorch's OpenReg
and the real backend, so tensors live on `neuron:<index>`.
"""

from __future__ import annotations

import sys

import torch
from torch.library import Library

from neuronkit.device.simulator import autocast, features, kernel, module, native, shim, streams
from neuronkit.device.simulator.config import SimConfig, load_config
from neuronkit.device.simulator.memory import HbmAccount
from neuronkit.policy import load_policy
from neuronkit.post_import import when_imported

_LIBS: list[Library] = []  # registrations live as long as their Library object

# Metadata-only ops: the CPU kernel runs directly on the device tensor and shares its storage.
_REDISPATCH = (
    "as_strided.default", "view.default", "view.dtype", "_reshape_alias.default", "unfold.default",
    "view_as_real.default", "view_as_complex.default", "set_.source_Storage_storage_offset",
    "set_.source_Storage", "set_.source_Tensor", "set_.default",
)
_ALLOCATE = ("empty.memory_format", "empty_strided.default")

def install(config: SimConfig | None = None) -> None:
    """Register the simulated device. Called once, by the autoload entry point or `neuronkit.device`."""
    if kernel.STATE is not None:
        return
    config = config or load_config()
    policy = load_policy()
    accounts = [HbmAccount(config.hbm_bytes_per_core, index) for index in range(config.device_count)]
    kernel.STATE = kernel.Device(policy, accounts, config.strict)
    module.CONFIG = config
    streams.Stream.host_cc = config.host_cc
    native.init(config.device_count, config.hbm_bytes_per_core, lambda index, nbytes: accounts[index].oom_message(nbytes))
    torch.utils.rename_privateuse1_backend("neuron")
    torch.utils.generate_methods_for_privateuse1_backend()
    torch._register_device_module("neuron", module)
    _register_kernels(policy, config)
    autocast.install(policy.autocast)
    features.install(policy)
    shim.install()
    when_imported("torch._dynamo.trace_rules", _skip_simulator_frames)
    when_imported("torch.distributed.distributed_c10d", _register_process_group)


def _register_process_group(c10d) -> None:
    """Backend "neuron" for torch.distributed, as the real package registers it when it loads."""
    from neuronkit.distributed import backend
    backend.register()


def _skip_simulator_frames(trace_rules) -> None:
    """Keep Dynamo out of the simulator's Python kernels. The real device's kernels are C++, invisible to
    Dynamo; these run from the dispatcher whenever an op executes eagerly in a compiled region (after a
    graph break), and Dynamo would otherwise try to compile their frames."""
    trace_rules.add("neuronkit.device.simulator")


def _overloads(policy, strict: bool) -> list[tuple[str, torch._ops.OpOverload]]:
    """Every ATen overload that reaches the PrivateUse1 key: those without a composite kernel, plus two
    kinds upstream implements as CompositeExplicitAutograd: natively lowered ops (the real backend
    registers them itself, e.g. native_layer_norm, which would otherwise decompose into batch norm) and
    gaps the device raises for (e.g. _make_dual), which must stop at the device. Under
    NEURONKIT_STRICT=1 every documented gap stops there too (e.g. hann_window, which otherwise
    decomposes)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    found = []
    for qualified in torch._C._dispatch_get_all_op_names():
        if not qualified.startswith("aten::") or has(qualified, "CompositeImplicitAutograd"):
            continue
        rule = policy.rule(qualified)
        stops = rule.blocked or (strict and bool(rule.documented))
        if has(qualified, "CompositeExplicitAutograd") and not stops and (
                not policy.runs_natively(qualified) or rule.is_view or rule.runtime == "decompose"):
            continue
        found.append(qualified)
    return [(q, _resolve(q)) for q in found]


def _resolve(qualified: str) -> torch._ops.OpOverload:
    name, _, overload = qualified[len("aten::"):].partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")


def _impl_name(short: str) -> str:
    return short.removesuffix(".default")


def _register_kernels(policy, config: SimConfig) -> None:
    lib = Library("aten", "IMPL")
    _LIBS.append(lib)
    special = set(_REDISPATCH) | set(_ALLOCATE) | {"_copy_from.default", "_copy_from_and_resize.default"}
    for qualified, op in _overloads(policy, config.strict):
        short = qualified[len("aten::"):]
        key = short if "." in short else f"{short}.default"
        if key in special:
            continue
        lib.impl(short, kernel.OpKernel(op, policy), "PrivateUse1")
    for short in _REDISPATCH:
        lib.impl(_impl_name(short), kernel.RedispatchToCpu(_resolve("aten::" + short)), "PrivateUse1")
    for short in _ALLOCATE:
        allocate = kernel.FailedInit(config.init_error) if config.init_error else kernel.Allocate(
            _resolve("aten::" + short))
        lib.impl(_impl_name(short), allocate, "PrivateUse1")
    lib.impl("_copy_from", kernel.CopyFrom(resize=False), "PrivateUse1")
    lib.impl("_copy_from_and_resize", kernel.CopyFrom(resize=True), "PrivateUse1")
    generic = Library("_", "IMPL")
    _LIBS.append(generic)
    generic.fallback(kernel.Fallback(policy), "PrivateUse1")


def installed() -> bool:
    """Whether the simulator owns `neuron` in this process."""
    return kernel.STATE is not None and "torch.neuron" in sys.modules
