"""The device's matrix products in bfloat16/float16 (csrc/matmul.cpp): accumulated in float32 and rounded once,
as Trainium's Tensor Engine does (NKI docs, nki.isa.nc_matmul), in float32 blocks of bounded size; and the CPU
side of a reduced-precision check computing its products the same way (neuronkit.pipeline.host_products).

Operands are small integers, so every float32 sum is exact and "accumulated in float32, rounded once" has one
right answer to compare with bit for bit; the deep sums exceed the integers the dtype holds exactly, so a
product accumulated in the reduced dtype would differ."""

from __future__ import annotations

import sys

import pytest
import torch

from neuronkit.pipeline.host_products import device_products

REDUCED = (torch.bfloat16, torch.float16)


def _ints(*shape: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(-1, 4, shape, generator=generator).to(dtype)


def _once(fn, *tensors: torch.Tensor, **kwargs) -> torch.Tensor:
    """`fn` on float32 copies, rounded to the operands' dtype once: what the Tensor Engine returns."""
    return fn(*(t.float() for t in tensors), **kwargs).to(tensors[0].dtype)


def _on_device(fn, *tensors: torch.Tensor, **kwargs) -> list[torch.Tensor]:
    """`fn` on the device twice: the first call of a signature takes the Python path (it compiles), the
    second the native one; both results back on the host."""
    moved = [t.to("neuron") for t in tensors]
    return [fn(*moved, **kwargs).cpu() for _ in range(2)]


# (label, M, K, N): one float32 step; the contraction split into blocks (K x N past 4M elements); the rows
# split into blocks (M x N past 4M elements)
SHAPES = [("small", 5, 300, 7), ("deep", 3, 4100, 1024), ("tall", 4200, 3, 1000)]


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
@pytest.mark.parametrize("label,m,k,n", SHAPES, ids=[s[0] for s in SHAPES])
def test_mm_and_addmm_accumulate_in_float32_and_round_once(dtype, label, m, k, n):
    a, b, bias = _ints(m, k, dtype=dtype, seed=1), _ints(k, n, dtype=dtype, seed=2), _ints(n, dtype=dtype, seed=3)
    want = _once(torch.mm, a, b)
    if label == "deep":  # sums past the dtype's exact integers (2 / eps): a sum kept in the dtype would round
        assert (a.float() @ b.float()).abs().max() > 2 / torch.finfo(dtype).eps
    for got in _on_device(torch.mm, a, b):
        assert torch.equal(got, want)
    for got in _on_device(torch.addmm, bias, a, b, beta=2, alpha=3):
        assert torch.equal(got, _once(torch.addmm, bias, a, b, beta=2, alpha=3))
    transposed = b.t().contiguous().t()  # a column-major weight, as `x @ W.T` passes it
    assert torch.equal(_on_device(torch.mm, a, transposed)[1], want)


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
def test_bmm_and_baddbmm_per_batch_blocks(dtype):
    for batch, m, k, n in ((4, 6, 40, 5), (2, 3, 4100, 600)):  # one step; per-batch blocks (4.9M elements)
        a, b = _ints(batch, m, k, dtype=dtype, seed=4), _ints(batch, k, n, dtype=dtype, seed=5)
        bias = _ints(m, n, dtype=dtype, seed=6)
        for got in _on_device(torch.bmm, a, b):
            assert torch.equal(got, _once(torch.bmm, a, b))
        for got in _on_device(torch.baddbmm, bias, a, b, beta=0.5, alpha=2):
            assert torch.equal(got, _once(torch.baddbmm, bias, a, b, beta=0.5, alpha=2))


def test_beta_zero_ignores_the_bias_and_other_dtypes_run_cpus_kernel():
    a, b = _ints(4, 8, dtype=torch.bfloat16, seed=7), _ints(8, 3, dtype=torch.bfloat16, seed=8)
    nan_bias = torch.full((3,), float("nan"), dtype=torch.bfloat16)
    assert torch.equal(torch.addmm(nan_bias.to("neuron"), a.to("neuron"), b.to("neuron"), beta=0).cpu(),
                       _once(torch.mm, a, b))  # as CPU's addmm: beta=0 drops the bias, NaN included
    x, y = torch.randn(4, 8), torch.randn(8, 3)
    assert torch.equal(torch.mm(x.to("neuron"), y.to("neuron")).cpu(), torch.mm(x, y))
    with pytest.raises(RuntimeError, match="dtype"):  # mixed dtypes: CPU's kernel and its error
        torch.mm(a.to("neuron"), y.to("neuron"))


def test_a_linear_layer_trains_in_bfloat16_as_on_the_cpu():
    """`nn.Linear` is addmm forward and two mm backward (one operand transposed): with exact sums the device's
    gradients are CPU's own kernel's, bit for bit."""
    layer = torch.nn.Linear(300, 32, dtype=torch.bfloat16)
    with torch.no_grad():
        layer.weight.copy_(_ints(32, 300, dtype=torch.bfloat16, seed=12))
        layer.bias.copy_(_ints(32, dtype=torch.bfloat16, seed=13))
    device_layer = torch.nn.Linear(300, 32, dtype=torch.bfloat16).to("neuron")
    device_layer.load_state_dict(layer.state_dict())
    x = _ints(4, 300, dtype=torch.bfloat16, seed=9)
    for module, inputs in ((layer, x), (device_layer, x.to("neuron"))):
        module(inputs).square().sum().backward()
    assert torch.equal(device_layer.weight.grad.cpu(), layer.weight.grad)
    assert torch.equal(device_layer.bias.grad.cpu(), layer.bias.grad)


def test_cpu_side_products_are_the_devices_only_for_reduced_dtypes_under_the_simulator(monkeypatch):
    a, b = _ints(16, 700, dtype=torch.bfloat16, seed=10), _ints(700, 9, dtype=torch.bfloat16, seed=11)
    with device_products(torch.bfloat16):
        assert torch.equal(torch.mm(a, b), _once(torch.mm, a, b))
        with device_products(torch.bfloat16) as nested:  # one routing layer, not two
            assert nested is None
    with device_products(torch.float32) as off:
        assert off is None
    monkeypatch.delitem(sys.modules, "neuronkit.device.simulator.native")  # the real backend: never imported
    with device_products(torch.bfloat16) as off:
        assert off is None
