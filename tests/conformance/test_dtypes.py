"""64-bit and complex tensors, and native dtype coverage (fidelity audit row 5).
Source: S = parmoham-aws/test-repo-parmoham @ 98154b8."""

from __future__ import annotations

import pytest
import torch

N = "neuron"
BIG = 2**31 + 5


def test_int64_past_int32_compares_as_the_device():
    """S: torch_neuronx/python_ops/dtype_autocast.py (_process_value): non-0-d int64 inputs are cast to
    int32 before the op, so 2**31 + 5 is negative on the device."""
    x = torch.tensor([BIG], device=N)
    assert x.dtype is torch.int64 and x.cpu().item() == BIG  # held at its width
    assert not bool((x > 0).cpu())
    assert bool((torch.tensor([BIG]) > 0).item())  # CPU says the opposite


@pytest.mark.parametrize("how", ["top level", "inside a list", "keyword argument"])
def test_narrowing_applies_to_every_tensor_argument(how):
    """S: dtype_autocast.py:45-80 (_process_value on tensors, on tensors in tuples/lists; process_args
    also casts keyword arguments except `out`)."""
    x = torch.tensor([2**40 + 3], device=N)
    wrapped = torch.tensor([2**40 + 3]).to(torch.int32).to(torch.int64)
    if how == "top level":
        got = torch.add(x, 0)
    elif how == "inside a list":
        got = torch.cat([x, x])[:1]
    else:
        got = torch.add(torch.zeros(1, dtype=torch.int64, device=N), other=x)
    assert got.dtype is torch.int64 and got.cpu().tolist() == wrapped.tolist()


def test_zero_dim_int64_is_not_narrowed_at_top_level():
    """S: dtype_autocast.py:52 (`value.ndim != 0` for top-level tensors)."""
    assert torch.tensor(BIG, device=N).cpu().item() == BIG


def test_in_place_int64_op_writes_back_at_width():
    """S: dtype_autocast.py restore_dtypes: outputs come back in the 64-bit dtype of the inputs."""
    x = torch.tensor([2**31 - 1], device=N)
    x.add_(1)
    assert x.dtype is torch.int64 and x.cpu().item() == -(2**31)


def test_float64_is_computed_in_float32():
    """S: dtype_autocast.py (float64 → float32 before the op, restored after)."""
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    got = (x.to(N) + 1e-10) - 1
    assert got.dtype is torch.float64 and got.cpu()[0].item() == 0.0


def test_complex_tensors_exist_but_ops_raise_the_devices_message():
    """S: tests/pytorch_tests/specs/aten_spec.json:126-141 ("Complex data types are not supported on
    Neuron"): complex tensors are created and moved; computing on them fails."""
    z = torch.randn(3, dtype=torch.complex64)
    on_device = z.to(N)
    assert on_device.dtype is torch.complex64
    torch.testing.assert_close(on_device.cpu(), z)
    with pytest.raises(RuntimeError, match="Complex data types are not supported on Neuron"):
        on_device * 2


def test_complex_inputs_of_ops_without_a_lowering_take_the_cpu_fallback():
    """S: torch_neuronx/csrc/core/NeuronBindings.cpp:483-485 registers the boxed CPU fallback for every op
    without a kernel, with no dtype check: `angle` and `polar` (unregistered) run on the host for complex
    tensors, recorded as fallbacks, and the audit reports them as fallbacks, not complex blockers."""
    import torch_neuronx
    z, r, theta = torch.randn(3, dtype=torch.complex64), torch.rand(3), torch.rand(3)
    torch_neuronx.clear_op_tracking()
    torch.testing.assert_close(torch.angle(z.to(N)).cpu(), torch.angle(z))
    torch.testing.assert_close(torch.polar(r.to(N), theta.to(N)).cpu(), torch.polar(r, theta))
    fallbacks = torch_neuronx.get_fallback_ops()
    assert any(op.startswith("aten::angle") for op in fallbacks) and any(op.startswith("aten::polar") for op in fallbacks)
    from neuronkit.op_audit import audit

    class Angle(torch.nn.Module):
        def forward(self, x):
            return torch.angle(torch.view_as_complex(x))

    report = audit(Angle(), torch.randn(3, 2))
    assert report.summary.blockers == [] and report.op("aten::angle").classification == "cpu_fallback"


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32])
def test_histc_keeps_the_devices_dtype_coverage(dtype):
    """S: torch_neuronx/python_ops/torch_mlir/ops/misc.py:86-130 (torch_histc: linear bin index, counted in
    the input dtype, for any dtype). CPU's kernel has no integer version."""
    values = torch.tensor([0, 1, 1, 2, 3, 3, 3, 7]).to(dtype)
    got = torch.histc(values.to(N), bins=4, min=0, max=7)
    assert got.dtype is dtype and got.cpu().tolist() == [3, 4, 0, 1]
    if dtype is not torch.float32:
        with pytest.raises(RuntimeError, match="not implemented"):
            torch.histc(values, bins=4, min=0, max=7)


def test_factory_64_bit_dtypes_are_computed_at_32_bits():
    """S: python_ops/torch_mlir/op_impl.py:89-95 runs torch-mlir ops under autocast_neuron(cast_dtype_params=True),
    which turns a float64/int64 `dtype` argument into float32/int32 (dtype_autocast.py:71-78) and restores the
    output's type (:128-150): a float64 `full` or `ones(...) * x` holds float32's value; int64 stays int64."""
    float32_third = torch.tensor(1 / 3, dtype=torch.float32).item()
    third = torch.full((2,), 1 / 3, dtype=torch.float64, device=N)
    assert third.dtype is torch.float64 and third.cpu()[0].item() == float32_third
    assert torch.full((2,), 1 / 3, dtype=torch.float64)[0].item() == 1 / 3  # CPU keeps float64
    summed = torch.ones(3, device=N).div(3).sum(dtype=torch.float64)
    assert summed.dtype is torch.float64 and summed.cpu().item() == torch.ones(3).div(3).sum().item()
    zeros = torch.zeros(3, dtype=torch.int64, device=N)
    assert zeros.dtype is torch.int64 and zeros.cpu().tolist() == [0, 0, 0]


def test_the_audit_flags_64_bit_narrowing_only_for_native_ops():
    """S: dtype_autocast.py narrows inside the op implementations (torch_mlir/op_impl.py:89-95); the boxed CPU
    fallback runs an op at its inputs' width (NeuronBindings.cpp:483-485), so an int64 fallback is exact."""
    from torch import nn

    from neuronkit.op_audit import audit

    class Net(nn.Module):
        def forward(self, x):
            return torch.cumprod(x + 1, 0)

    flagged = {f.op for f in audit(Net(), torch.arange(4)).findings if f.category == "int64_emulated"}
    assert "aten::add" in flagged and "aten::cumprod.out" not in flagged
