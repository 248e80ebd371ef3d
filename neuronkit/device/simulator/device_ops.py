"""Host implementations of the ops whose device kernel differs from CPU's.

The per-op kernel normally runs CPU's kernel for an op on CPU aliases of the device tensors. For the ops
here the real backend's kernel behaves differently from CPU's (it raises where CPU runs, or runs where
CPU has no kernel for the dtype), so the kernel runs these functions instead. Each is small, takes and
returns CPU tensors, and cites the snapshot path (parmoham-aws/test-repo-parmoham @ 98154b8) it models,
so it can be ported to the C++ kernel as it is (the fused attention kernel was: csrc/attention.cpp).
"""

from __future__ import annotations

from typing import Callable

import torch

from neuronkit.device.simulator import native

_aten = torch.ops.aten


def histc(input: torch.Tensor, bins: int = 100, min: float = 0, max: float = 0) -> torch.Tensor:
    """`aten::histc` for every dtype, as the device's lowering computes it (linear bin index, clamped,
    counted in the input's dtype; `python_ops/torch_mlir/ops/misc.py::torch_histc`). CPU's kernel has
    no integer version, which transformers' MoE routers hit (`torch.histc` on int32 off CPU)."""
    if input.is_floating_point():
        return _aten.histc.default(input, bins, min, max)
    lo, hi = float(min), float(max)
    if lo == 0.0 and hi == 0.0 and input.numel() > 0:
        lo, hi = float(input.min()), float(input.max())
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    data = input.flatten().double()
    index = ((data - lo) * bins / (hi - lo)).to(torch.int32).clamp_(0, bins - 1)
    in_range = (data >= lo) & (data <= hi)
    matches = (index.unsqueeze(1) == torch.arange(bins, dtype=torch.int32).unsqueeze(0)) & in_range.unsqueeze(1)
    return matches.sum(dim=0, dtype=input.dtype)


# The fused attention kernel (SDPA's device kernel for 4-D inputs, forward and backward, csrc/attention.cpp) and
# the matrix products (bfloat16/float16 accumulated in float32 and rounded once, as the Tensor Engine does,
# csrc/matmul.cpp) are C++: the native per-op path runs them directly, the Python path through these bindings.
_NATIVE: dict[str, Callable] = {
    "aten::_scaled_dot_product_fused_attention_overrideable": native.fused_attention,
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": native.fused_attention_backward,
    "aten::mm": native.device_mm,
    "aten::addmm": native.device_addmm,
    "aten::bmm": native.device_bmm,
    "aten::baddbmm": native.device_baddbmm,
}
NATIVE_IMPLS = frozenset(_NATIVE)
# Overload name -> host implementation, read by the per-op kernel.
HOST_IMPLS: dict[str, Callable] = {"aten::histc": histc, **_NATIVE}


def has_compatible_shallow_copy_type(self: torch.Tensor, src: torch.Tensor) -> bool:
    """`aten::_has_compatible_shallow_copy_type` for the device: CPU and neuron tensors can share a
    TensorImpl's metadata (`csrc/aten/NeuronNativeFunctions.cpp:364-377`), so `module.to('neuron')`
    moves parameters in place (tied weights stay tied) and `param.data = neuron_tensor` works."""
    a, b = self.device.type, src.device.type
    return a == b or {a, b} == {"cpu", "neuron"}


def record_stream(self: torch.Tensor, stream: torch.Stream) -> None:
    """`aten::record_stream` for the device (`csrc/aten/RecordStream.cpp:10-19`, registered at
    `csrc/core/NeuronBindings.cpp:442`): the tensor and the stream must be neuron's, then the caching
    allocator notes the stream's use of the block (`NeuronCachingAllocator::recordStream`). The simulated
    device completes every op when it is enqueued, so no block can be reused while a stream still reads
    it: the two checks are all there is to do. Without this kernel the op reached the per-op kernel and
    CPU's (which has none), so FSDP1's `tensor.record_stream(stream)` (torch/distributed/fsdp/
    _common_utils.py) failed."""
    if self.device.type != "neuron":  # RecordStream.cpp:12-13 (the dispatcher sends only neuron tensors here)
        raise RuntimeError(f"record_stream: expected neuron tensor, but got: {self.device}")
    if stream.device.type != "neuron":  # RecordStream.cpp:14-15 (c10's DeviceType prints lower-case)
        raise RuntimeError(f"record_stream: expected neuron stream, but got device type: {stream.device.type}")
