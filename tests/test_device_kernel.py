"""The device's native per-op kernel (csrc/kernel.cpp): the common call runs in C++, the rest in kernel.py's
Python path; both keep one record of tracking and NEFF-cache statistics and map results the same way."""

from __future__ import annotations

import torch
import torch_neuronx
from torch.library import Library

from neuronkit.device.simulator import kernel, tracking

N = "neuron"


def _stats() -> dict:
    return torch.neuron.neff_cache_stats()


def test_repeated_op_counts_one_compile_then_hits():
    """The first call of a signature compiles (Python path), the next ones are in-memory hits (native path)."""
    x, y = torch.randn(5, 7, device=N), torch.randn(5, 7, device=N)
    before = _stats()
    for _ in range(4):
        x.mul(y)
    after = _stats()
    assert after["entries"] == before["entries"] + 1
    assert after["hits"] == before["hits"] + 3
    assert after["misses"] + after["disk_hits"] == before["misses"] + before["disk_hits"] + 1


def test_clearing_the_cache_forgets_native_hits():
    x = torch.randn(3, 11, device=N)
    x.neg(), x.neg()
    kernel.STATE.cache.clear()
    assert _stats()["hits"] == 0 and _stats()["entries"] == 0
    x.neg(), x.neg()
    assert _stats()["entries"] == 1 and _stats()["hits"] == 1


def test_observers_see_every_op_and_the_results_match():
    """With an observer attached every op takes the Python path; results and tracking are the same."""
    x = torch.randn(4, 4, device=N)
    fast = (x @ x).relu().sum(0)
    seen = []
    tracking.observers.append(seen.append)
    try:
        slow = (x @ x).relu().sum(0)
    finally:
        tracking.observers.remove(seen.append)
    assert [e.name for e in seen] == ["aten::mm", "aten::relu", "aten::sum"]
    assert torch.equal(fast.cpu(), slow.cpu()) and slow.device == fast.device


def test_in_place_out_and_view_results_are_the_device_tensors():
    x = torch.zeros(6, device=N)
    assert x.add_(1) is x
    out = torch.empty(0, device=N)
    assert torch.mul(x, 3, out=out) is out and out.shape == (6,) and out.device.type == N
    view = x.view(2, 3)
    parts = torch.split(x, 2)
    assert view.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert all(p.device == x.device and p._base is x for p in parts)
    view.fill_(5)
    assert x.cpu().tolist() == [5.0] * 6


def test_device_argument_chooses_the_core_or_the_host():
    assert torch.full((2,), 3.0, device="neuron:1").device == torch.device("neuron:1")
    assert torch.arange(4, device="neuron:2", dtype=torch.float32).device == torch.device("neuron:2")
    x = torch.ones(3, device="neuron:1")
    assert x.to("cpu").device.type == "cpu" and x.new_zeros(2).device == torch.device("neuron:1")


def test_an_op_registered_after_start_up_falls_back_through_the_boxed_kernel():
    """Custom libraries reach the device through the fallback, recorded under their qualified name."""
    lib = Library("nk_kernel_test", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CPU")
    torch_neuronx.clear_op_tracking()
    out = torch.ops.nk_kernel_test.twice(torch.ones(3, device="neuron:1"))
    assert out.device == torch.device("neuron:1") and out.cpu().tolist() == [2.0, 2.0, 2.0]
    assert "nk_kernel_test::twice" in torch_neuronx.get_fallback_ops()
