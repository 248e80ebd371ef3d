"""The device's native per-op kernel (csrc/kernel.cpp): the common call runs in C++, the rest in kernel.py's
Python path; both keep one record of tracking and NEFF-cache statistics and map results the same way."""

from __future__ import annotations

import tomllib

import pytest
import torch
import torch_neuronx
from torch.library import Library
from transformers import AutoModelForCausalLM

from neuronkit import call_rules
from neuronkit.device.simulator import kernel, native, tracking
from neuronkit.resources import data_dir
from conftest import TINY_QWEN3

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


def _python_calls(run) -> dict[str, int]:
    """The calls `run()` sent to the kernel's Python path, per overload."""
    before = native.slow_calls()
    run()
    return {k: v - before.get(k, 0) for k, v in native.slow_calls().items() if v != before.get(k, 0)}


def test_a_warm_training_step_compiles_nothing_and_stays_native():
    """A second identical AdamW step compiles no NEFF (a ScalarList's numbers, AdamW's bias corrections, are
    0-d inputs, not key parts: S python_ops/processors/argument_processor.py, kernels/base.py get_cache_key),
    and neither it nor a forward enters Python: the int64 ids, the embedding, clone and nll_loss run in C++."""
    model = AutoModelForCausalLM.from_pretrained(TINY_QWEN3).to(N)
    ids = torch.randint(0, model.config.vocab_size, (2, 8), generator=torch.Generator().manual_seed(0)).to(N)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()

    step(), step()
    misses = _stats()["misses"]
    assert _python_calls(step) == {}
    assert _stats()["misses"] == misses
    with torch.no_grad():
        assert _python_calls(lambda: model(input_ids=ids)) == {}


def test_scalar_list_numbers_are_not_part_of_the_neff_key():
    xs = [torch.ones(3, device=N), torch.ones(5, device=N)]
    torch._foreach_div_(xs, [2.0, 4.0])
    misses = _stats()["misses"]
    torch._foreach_div_(xs, [3.0, 5.0])
    assert _stats()["misses"] == misses
    assert torch.allclose(xs[1].cpu(), torch.full((5,), 0.05))


def test_64_bit_calls_run_natively_and_narrow_as_the_python_path_does():
    """int64 and float64 arguments are narrowed in C++ with the same observable result as kernel.py's path
    (which runs the first call of each signature)."""
    big = torch.tensor([2**31 + 5, 7], dtype=torch.int64, device=N)
    first = big + 0  # first-seen signature: the Python path
    second = None

    def again() -> None:
        nonlocal second
        second = big + 0

    calls = _python_calls(again)
    assert calls == {} and second.dtype is torch.int64
    assert second.cpu().tolist() == first.cpu().tolist() == [-(2**31) + 5, 7]
    x = torch.tensor([1.0, 1e-10], dtype=torch.float64, device=N)
    (x + 1), (x + 1)
    got = x + 1
    assert got.dtype is torch.float64 and got.cpu()[1].item() == 1.0  # computed in float32


def test_in_place_64_bit_lists_get_their_results_back():
    """A written list (in-place foreach) gets the narrowed results back at its width, in C++ and Python."""
    for _ in range(2):  # first call: Python path; second: native path
        xs = [torch.full((2,), 2**31 - 1, dtype=torch.int64, device=N), torch.zeros(3, dtype=torch.float64, device=N)]
        torch._foreach_add_(xs, 1)
        assert xs[0].cpu().tolist() == [-(2**31)] * 2 and xs[1].dtype is torch.float64
        assert xs[1].cpu().tolist() == [1.0] * 3


def test_a_call_rule_enters_python_only_when_it_fires():
    x = torch.randn(2, 3, 4, 5, device=N)
    x.clone(), x.clone()
    assert _python_calls(lambda: x.clone()) == {}
    for _ in range(2):  # the second call has a known NEFF signature: the rule, not the cache, decides
        with pytest.raises(NotImplementedError, match=r"\[channels_last\]"):
            x.clone(memory_format=torch.channels_last)


def test_the_call_rules_are_the_native_ones_and_answer_python_calls():
    """One definition (csrc/call_rules.cpp): every `call_rule` of the policy exists natively, and Python asks
    the same predicates, missing arguments taking the schema's default."""
    named = {f["call_rule"] for f in tomllib.loads((data_dir() / "op_support.toml").read_text())["gap"]
             if "call_rule" in f}
    assert named == call_rules.RULES
    assert call_rules.fires("mha_need_weights", "aten::_native_multi_head_attention", {})  # default True
    assert not call_rules.fires("mha_need_weights", "aten::_native_multi_head_attention", {"need_weights": False})
    assert call_rules.fires("channels_last", "aten::clone", {"memory_format": torch.channels_last_3d})
    assert not call_rules.fires("channels_last", "aten::clone", {"memory_format": torch.contiguous_format})
    assert call_rules.fires("sparse_flag", "aten::embedding", {"sparse": True})
    assert call_rules.fires("mha_mask", "aten::_native_multi_head_attention", {"mask": torch.ones(1)})
    with pytest.raises(RuntimeError, match="unknown call_rule"):
        call_rules.fires("no_such_rule", "aten::clone", {})


def test_each_overload_record_is_a_named_record_the_native_kernel_reads_by_field():
    """kernel.py describes an overload once as a NativeRecord; csrc/kernel.cpp reads it by field name."""
    fresh, in_place = kernel.describe("aten::add.Tensor"), kernel.describe("aten::add_.Tensor")
    assert isinstance(fresh, kernel.NativeRecord) and fresh.kind == "kernel" and fresh.native and fresh.compiles
    assert fresh.returns == [None] and in_place.returns == [(0, True)] and fresh.name == "aten::add"
    assert kernel.describe("aten::view").view and not kernel.describe("aten::view").compiles
    x = torch.ones(3, device=N)
    assert torch.equal(x.add_(x).cpu(), torch.full((3,), 2.0))  # the in-place result is the device tensor's


def test_the_python_path_keys_narrows_and_maps_results_with_the_native_mechanics():
    """Issue 21 item 7: the per-call mechanics exist once, in csrc/kernel.cpp; kernel.py's Python path calls
    them (`native.PythonCall`, `native.device_results`) and keeps no copy of its own."""
    a, b = torch.ones(3), torch.ones(3)
    key = native.PythonCall("aten::add.Tensor", [a, b, 1]).key()
    assert isinstance(key, bytes) and key == native.PythonCall("aten::add.Tensor", [a, b, 2]).key()  # 0-d input
    assert key != native.PythonCall("aten::add.Tensor", [a, b, 1.5]).key()  # its type is part of the key
    assert key != native.PythonCall("aten::add.Tensor", [a, torch.ones(4), 1]).key()
    assert native.PythonCall("aten::add.Tensor", [torch.ones(0), torch.ones(0), 1]).key() is None  # nothing compiles
    wide = torch.tensor([2**31 + 5, 7], dtype=torch.int64)
    call = native.PythonCall("aten::add_.Tensor", [wide, wide, 1])
    narrowed = call.narrowed([wide, wide, 1])
    assert narrowed[0].tolist() == [-(2**31) + 5, 7] and narrowed[2] == 1
    assert call.restored(narrowed[0].add_(narrowed[1])) is wide and wide.tolist() == [10, 14]  # int32 wrap-around
    x = torch.arange(6.0, device=N).reshape(2, 3)
    host = kernel.to_cpu(x)
    view = native.device_results("aten::t", host.t(), [x], 0)
    assert view.device == x.device and view.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    fresh = native.device_results("aten::neg", host.neg(), [x], 0)
    assert fresh.device == x.device and fresh.cpu().tolist() == (-x).cpu().tolist()
    assert not {"signature", "_narrow", "_one", "rebind"} & set(vars(kernel))
