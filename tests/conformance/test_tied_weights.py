"""Tied weights across `.to('neuron')` (fidelity audit row 4). Source: S = parmoham-aws/test-repo-parmoham."""

from __future__ import annotations

import torch
from torch import nn

N = "neuron"


def test_to_neuron_keeps_tied_weights_tied():
    """S: torch_neuronx/csrc/aten/NeuronNativeFunctions.cpp:364-377 (`_has_compatible_shallow_copy_type`
    True for CPU↔neuron), tests/operations/test_has_compatible_shallow_copy_type.py."""
    embed, head = nn.Embedding(10, 4), nn.Linear(4, 10, bias=False)
    head.weight = embed.weight
    model = nn.ModuleDict({"embed": embed, "head": head}).to(N)
    assert model["embed"].weight is model["head"].weight
    assert model["head"].weight.device.type == N and isinstance(model["head"].weight, nn.Parameter)


def test_param_data_accepts_a_device_tensor():
    """S: NeuronNativeFunctions.cpp:364-377: `param.data = neuron_tensor` passes set_data's check."""
    param = nn.Parameter(torch.zeros(3))
    param.data = torch.ones(3, device=N)
    assert param.device.type == N and param.cpu().tolist() == [1.0, 1.0, 1.0]


def test_shallow_copy_compatibility_is_device_based():
    """S: NeuronNativeFunctions.cpp:370-376 (same device, or CPU and neuron either way)."""
    cpu, dev = torch.zeros(2), torch.zeros(2, device=N)
    assert torch._has_compatible_shallow_copy_type(cpu, dev)
    assert torch._has_compatible_shallow_copy_type(dev, cpu)
    assert torch._has_compatible_shallow_copy_type(dev, dev)
