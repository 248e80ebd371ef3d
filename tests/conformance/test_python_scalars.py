"""Python numbers as operands of binary ops on the device, on the first call of each signature."""

from __future__ import annotations

import warnings

import pytest
import torch

from neuronkit.device.simulator import kernel

N = torch.device("neuron")
# A Python operand of each kind, and device tensors of each kind it meets.
SCALARS = (7, 2.5, True)
TENSORS = {torch.float32: torch.tensor([[-3.5, 0.0, 2.0], [5.0, -1.0, 9.25]]),
           torch.int32: torch.tensor([[-3, 0, 2], [5, -1, 9]], dtype=torch.int32),
           torch.bool: torch.tensor([[True, False, True], [False, False, True]])}


def _binary_ufuncs() -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import binary_ufuncs
    return [op for op in binary_ufuncs if not op.variant_test_name and not op.name.startswith("_refs")]


def _outcome(fn, *args):
    """(result, None) or (None, the exception's type and first line)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args), None
    except Exception as exc:
        return None, (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")


def test_every_binary_op_takes_a_python_number_on_its_first_call():
    """S: a Python number in a Tensor position reaches the device as a wrapped-number tensor, which S's
    kernels take as a 0-d input (python_ops/processors/argument_processor.py preprocess_inputs;
    `remainder.Tensor_out` runs natively, torch_mlir/ops/binary.py:56). Every binary ufunc of PyTorch's
    OpInfo database, with a Python int, float and bool on a float, int and bool tensor, on a fresh NEFF
    cache (each call is the first of its signature, which takes the kernel's Python path): the device gives
    the CPU's result, or the CPU's error. The first `x % 7`, `x & 1`, `x | 2` or `x ^ 3` used to raise a
    schema error there (fidelity review 2026-12, §1.3 mismatch 1)."""
    failures = []
    checked = 0
    for op in _binary_ufuncs():
        fn = op.op
        for dtype, host in TENSORS.items():
            for scalar in SCALARS:
                expected, cpu_error = _outcome(fn, host, scalar)
                kernel.STATE.cache.clear()  # the first call of its signature
                got, device_error = _outcome(fn, host.to(N), scalar)
                checked += 1
                label = f"{op.name}({dtype}, {scalar!r})"
                if cpu_error is not None:
                    if device_error is None:
                        failures.append(f"{label}: the CPU raises {cpu_error}, the device runs")
                    continue
                if device_error is not None:
                    failures.append(f"{label}: {device_error}")
                    continue
                try:
                    torch.testing.assert_close(got.cpu(), expected, equal_nan=True)
                except AssertionError as exc:
                    failures.append(f"{label}: {str(exc).splitlines()[0]}")
    assert checked > 300
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("expression", ["x % 7", "x & 1", "x | 2", "x ^ 3", "x.remainder(3)", "b & True",
                                        "torch.take_along_dim(y, (x % 3).long(), 1)"])
def test_first_call_of_common_scalar_expressions(expression):
    """S: torch_mlir/ops/binary.py:56 (remainder.Tensor_out) and torch_mlir/ops/logical.py:39-55 (bitwise
    and/or/xor) run these natively; the expressions of the fidelity review's `firstcall.py` each on a fresh
    NEFF cache, the device's result equal to the CPU's."""
    values = {"x": torch.arange(12, dtype=torch.int32).reshape(3, 4), "b": torch.tensor([True, False]),
              "y": torch.arange(12.0).reshape(3, 4), "torch": torch}
    expected = eval(expression, values)
    kernel.STATE.cache.clear()  # the first call of its signature
    got = eval(expression, {k: v.to(N) if isinstance(v, torch.Tensor) else v for k, v in values.items()})
    assert torch.equal(got.cpu(), expected)
