"""Random ops with an explicit `torch.Generator(device="neuron")` (fidelity review §5.3)."""

from __future__ import annotations

import pytest
import torch

MESSAGE = "Expected a 'cpu' device type for generator but found 'neuron'"


@pytest.mark.parametrize("draw", [
    lambda g: torch.randn(3, device="neuron", generator=g),
    lambda g: torch.rand(2, 2, device="neuron", generator=g),
    lambda g: torch.randint(0, 9, (4,), device="neuron", generator=g),
    lambda g: torch.randperm(5, device="neuron", generator=g),
    lambda g: torch.empty(4, device="neuron").normal_(generator=g),
    lambda g: torch.bernoulli(torch.full((4,), 0.5, device="neuron"), generator=g),
    lambda g: torch.multinomial(torch.ones(4, device="neuron"), 2, generator=g),
], ids=["randn", "rand", "randint", "randperm", "normal_", "bernoulli", "multinomial"])
def test_an_explicit_device_generator_is_refused_by_the_cpu_fallback(draw):
    """S: every random op reaches the boxed CPU fallback (S registers none: NeuronBindings.cpp:232-246,484),
    and at::native::cpu_fallback hands the Generator to the CPU kernel unchanged, whose
    check_generator<CPUGeneratorImpl> raises (torch 2.13 ATen/core/Generator.h:152-156). Code ported from
    CUDA with torch.Generator(device) fails there (diffusers' randn_tensor with a device generator); a
    CPU generator, or the core's default one, draws."""
    generator = torch.Generator(device="neuron").manual_seed(0)
    with pytest.raises(RuntimeError, match=MESSAGE):
        draw(generator)
    assert draw(torch.Generator().manual_seed(0)).device.type == "neuron"
    assert draw(None).device.type == "neuron"
