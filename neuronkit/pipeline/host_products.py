"""The CPU side of a bfloat16/float16 check computes its matrix products as the simulated device does.

Both compute a reduced-precision product the same way, in float32 with one rounding: CPU's own kernel
(`at::opmath_type` accumulation) and the device's (`csrc/matmul.cpp`, as Trainium's Tensor Engine accumulates
in PSUM). Their results differ only in the order of the float32 sum (bench/bench_matmul.py). But PyTorch 2.13's
CPU bfloat16 gemm on a host without AVX-512 BF16 takes 20-90x longer when both operands are row-major,
which is a large model's head backward: a 1B model's CPU training step waited minutes on it. So while the
simulated device is installed, the CPU side's `mm`, `addmm`, `bmm` and `baddbmm` run through the device's host
routine; with the real backend the CPU's own kernels run (and the simulator's extension is never imported).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

_NATIVE = "neuronkit.device.simulator.native"  # imported by the simulator's install(), never here


class _DeviceProducts(TorchDispatchMode):  # type: ignore[misc]  # torch is read untyped (pyproject: mypy)
    """Routes the four matrix-product overloads to the device's host routine (float32 and other dtypes
    pass through it to CPU's kernel unchanged); every other op runs as it is."""

    def __init__(self, native: Any) -> None:
        super().__init__()
        aten = torch.ops.aten
        self.routes = {aten.mm.default: native.device_mm, aten.addmm.default: native.device_addmm,
                       aten.bmm.default: native.device_bmm, aten.baddbmm.default: native.device_baddbmm}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        route = self.routes.get(func)
        return (route or func)(*args, **(kwargs or {}))


def device_products(dtype: torch.dtype) -> contextlib.AbstractContextManager[Any]:
    """Inside the block (forward and backward), the CPU's reduced-precision products are the simulated
    device's; nothing changes for float32, when the simulator is not installed, or inside another such block."""
    native = sys.modules.get(_NATIVE)
    active = any(isinstance(mode, _DeviceProducts) for mode in _get_current_dispatch_mode_stack())
    if native is None or active or dtype not in (torch.bfloat16, torch.float16):
        return contextlib.nullcontext()
    return _DeviceProducts(native)
