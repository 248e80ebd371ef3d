"""Install the simulated `neuron` device into this process's PyTorch.

What this reproduces, from behaviour doc §1: the PrivateUse1 backend renamed `neuron`, `torch.neuron`
as its device module, `tensor.neuron()` / `module.neuron()`, `torch.accelerator` integration, a
`torch_neuronx` module with op tracking; from §2: a per-op kernel for every ATen op plus a boxed
fallback; from §5: AutocastPrivateUse1 with upstream's lists (autocast.py). The mechanics are
real PrivateUse1 tensors over CPU memory (docs/fidelity.md lists where they differ from the device). The device
guard, hooks, generators and allocators are native (csrc/, built by setup.py), as in PyTorch's OpenReg
and the real backend, so tensors live on `neuron:<index>`.
"""

from __future__ import annotations

import sys

import torch

from neuronkit.device.simulator import autocast, features, kernel, module, native, shim, streams
from neuronkit.device.simulator.config import SimConfig, load_config
from neuronkit.device.simulator.memory import HbmAccount
from neuronkit.policy import load_policy, overload
from neuronkit.post_import import when_imported

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
    from neuronkit.device.process_group import backend
    backend.register()


def _skip_simulator_frames(trace_rules) -> None:
    """Keep Dynamo out of the simulator's Python kernels. The real device's kernels are C++, invisible to
    Dynamo; these run from the dispatcher whenever an op executes eagerly in a compiled region (after a
    graph break), and Dynamo would otherwise try to compile their frames."""
    trace_rules.add("neuronkit.device.simulator")


def _named_overloads(policy, strict: bool) -> list[str]:
    """The ATen overloads the kernel must be registered for by name: those upstream implements as
    CompositeExplicitAutograd (or its non-functional variant), which outranks the boxed fallback that every other op
    without a composite kernel reaches. Two kinds of them stop at the device: overloads the real backend registers a
    kernel for (verdict `native` in the running torch's op table, data/op_verdicts-torch<release>.json, e.g.
    native_layer_norm, which would otherwise decompose into batch norm; not the hand-kept ones that compile nothing,
    such as copy_ and _to_copy, whose composites move the data) and gaps the device raises for (e.g. _make_dual);
    under NEURONKIT_STRICT=1 every documented gap too (e.g. hann_window, which otherwise decomposes). Every other
    one decomposes as on the device, its parts deciding (`pixel_shuffle`, `logsumexp.out`; `argmax` into
    `argmax.out`, which then takes the fallback under that name). In-place views (`as_strided_`, `squeeze_`, ...)
    never: they change the tensor's metadata only, which the composite kernel does, and the real backend registers
    none of them (NeuronBindings.cpp:415-443)."""
    found = []
    for tagged in native.composite_explicit_overloads():  # "E" CompositeExplicitAutograd, "N" non-functional
        qualified = tagged[1:]
        if _is_inplace_view(qualified):
            continue
        rule = policy.rule(qualified)
        if rule.blocked or (strict and bool(rule.documented)) or (
                policy.verdict(qualified) == "native" and not rule.is_view):
            found.append(qualified)
    found.extend(kernel.SPECIAL)  # the ones handled by kind, whatever composite kernels upstream has
    return sorted({q[len("aten::"):] for q in found})


def _is_inplace_view(qualified: str) -> bool:
    """Whether an ATen overload (`aten::as_strided_`) is tagged as changing its input's metadata only."""
    if not qualified.partition(".")[0].endswith("_"):  # every in-place op's name does; the rest need no lookup
        return False
    return torch.Tag.inplace_view in overload(qualified).tags


def _register_kernels(policy, config: SimConfig) -> None:
    """One native boxed kernel for every op on the device (csrc/kernel.cpp), reading each overload's
    record from kernel.py once and calling its Python path where it must."""
    native.install_kernel(kernel.describe, kernel.slow, _named_overloads(policy, config.strict), config.init_error or "")


def installed() -> bool:
    """Whether the simulator owns `neuron` in this process."""
    return kernel.STATE is not None and "torch.neuron" in sys.modules
