"""API shapes as the source has them (fidelity audit rows 6, 7, 10). Source: S = parmoham-aws/test-repo-parmoham."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx

N = "neuron"


def test_op_tracking_returns_lists_named_like_the_boxed_fallback():
    """S: csrc/core/NeuronBindings.cpp:981-994 (py::list); the fallback names the op with
    c10::toString(operator_name), overload included (NeuronBindings.cpp:232-234): for a structured op the
    overload its composite calls, `cumprod.out` and `i0.out` (torch's CompositeExplicitAutogradNonFunctional
    kernels of cumprod and i0 serve PrivateUse1; S registers neither)."""
    torch_neuronx.clear_op_tracking()
    x = torch.randn(4, device=N)
    torch.cumprod(x, 0)
    torch.special.i0(x)
    fallbacks, executed = torch_neuronx.get_fallback_ops(), torch_neuronx.get_executed_ops()
    assert isinstance(fallbacks, list) and isinstance(executed, list)
    assert "aten::cumprod.out" in fallbacks and "aten::i0.out" in fallbacks
    assert all(name.startswith("aten::") for name in fallbacks + executed)


def test_memory_stats_are_nested_and_reserved_is_zero():
    """S: NeuronBindings.cpp:1239-1262 (nested dicts), torch_neuronx/memory.py:38,88-101 (reserved 0)."""
    keep = torch.empty(1024, device=N)
    stats = torch.neuron.memory_stats()
    assert set(stats) == {"allocated_bytes", "reserved_bytes", "active_bytes", "num_alloc_retries", "num_ooms",
                          "num_tensor_frees", "allocation_requests"}
    assert set(stats["allocated_bytes"]) == {"current", "peak", "allocated", "freed"}
    assert stats["allocated_bytes"]["current"] == torch.neuron.memory_allocated() >= keep.nbytes
    assert torch.neuron.memory_reserved() == 0 and stats["reserved_bytes"]["current"] == 0


def test_torch_accelerator_memory_queries_need_a_device_allocator_the_source_does_not_register():
    """S: NeuronCachingAllocator.cpp:298 (`class NeuronAllocator : public c10::Allocator`, set with c10::SetAllocator,
    NeuronBindings.cpp:335): not a c10 DeviceAllocator, so torch.accelerator's memory queries stop in torch's
    own check; torch.neuron's answer."""
    with pytest.raises(RuntimeError, match="not a DeviceAllocator"):
        torch.accelerator.memory_allocated()
    assert torch.neuron.memory_allocated() >= 0


def test_device_functions_take_an_index_or_a_torch_device_not_a_string():
    """S: set_device reads `device.index` (torch_neuronx/neuron.py:22-33), which for a string is str.index, and
    compares it with 0 (__init__.py:196-206); the memory functions pass it to _C (memory.py:13-25); both fail with a
    TypeError. get_device_name takes an int (default 0) or a torch.device, printed as it is (neuron.py:36-53)."""
    for call in (lambda: torch.neuron.set_device("neuron:0"), lambda: torch.neuron.memory_allocated("neuron"),
                 lambda: torch.neuron.max_memory_allocated("neuron:0"), lambda: torch.neuron.memory_stats("neuron")):
        with pytest.raises(TypeError, match="takes a device index or a torch.device"):
            call()
    with pytest.raises(ValueError, match="expected torch.device or int type"):
        torch.neuron.get_device_name("neuron:1")
    assert torch.neuron.get_device_name() == "neuron:0" and torch.neuron.get_device_name(2) == "neuron:2"
    assert torch.neuron.get_device_name(torch.device("neuron")) == "neuron"
    assert torch.neuron.memory_allocated(torch.device("neuron:0")) == torch.neuron.memory_allocated(0)


def test_oom_is_the_runtimes_runtime_error(forked_python):
    """S: csrc/core/allocator/NeuronCachingAllocator.cpp:82-88 ("NRT allocation failed for size N (OOM)")."""
    proc = forked_python("""
        import torch
        try:
            torch.empty(2**20, device="neuron")
        except RuntimeError as e:
            print(type(e).__name__, isinstance(e, torch.OutOfMemoryError), str(e).split(":")[0])
    """, env={"NEURONKIT_HBM_PER_CORE": "1MiB"})
    assert proc.stdout.strip() == f"OutOfMemoryError True NRT allocation failed for size {2**22} (OOM)"


test_oom_is_the_runtimes_runtime_error = pytest.mark.subprocess(test_oom_is_the_runtimes_runtime_error)


def test_current_stream_operations():
    """S: torch_neuronx/neuron.py:256-274 (wait_stream, wait_event, record_event, query)."""
    other = torch.neuron.Stream()
    torch.neuron.wait_stream(other)
    event = torch.neuron.record_event()
    torch.neuron.wait_event(event)
    assert torch.neuron.query() is True and event.query()


def test_torch_neuronx_exports():
    """S: torch_neuronx/__init__.py (get_device_properties, streams, device, memory_summary,
    reset_accumulated_memory_stats, get_dynamo_metrics/reset_dynamo_metrics)."""
    for name in ("get_device_properties", "current_stream", "default_stream", "set_stream", "stream", "device",
                 "memory_summary", "reset_accumulated_memory_stats", "get_dynamo_metrics", "reset_dynamo_metrics"):
        assert callable(getattr(torch_neuronx, name)), name


def test_a_visible_core_past_the_count_fails_at_runtime_init(forked_python):
    """Fidelity audit row 10: S fails at runtime init with a RuntimeError (the device stays registered)."""
    proc = forked_python("""
        import torch
        print(hasattr(torch, "neuron"))
        try:
            print(torch.ones(2, device="neuron"))
        except RuntimeError as e:
            print("init failed:", e)
    """, env={"NEURON_RT_VISIBLE_CORES": "0,500"})
    lines = proc.stdout.splitlines()
    assert lines[:1] == ["True"] and lines[1:2] and lines[1].startswith(
        "init failed: Neuron runtime initialization failed"), proc.stdout + proc.stderr


test_a_visible_core_past_the_count_fails_at_runtime_init = pytest.mark.subprocess(
    test_a_visible_core_past_the_count_fails_at_runtime_init)
