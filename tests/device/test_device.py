"""The simulated device through PyTorch's public API: creation, movement, serialization, autocast,
`torch.neuron`'s module API, memory accounting, streams, op tracking and the NEFF cache."""

from __future__ import annotations

import copy
import io

import pytest
import torch
import torch.nn as nn
import torch_neuronx


def test_factories_methods_and_accelerator():
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.zeros(2, 3, device="neuron").device == torch.device("neuron", 0)
    assert torch.arange(5, device="neuron").cpu().tolist() == [0, 1, 2, 3, 4]
    assert torch.tensor([1.0, 2.0]).neuron().device.type == "neuron"
    assert nn.Linear(2, 2).neuron().weight.device.type == "neuron"
    assert isinstance(nn.Linear(2, 2).to("neuron").weight, nn.Parameter)
    assert repr(torch.ones(2, device="neuron")) == "tensor([1., 1.], device='neuron:0')"


def test_views_share_memory_and_write_through():
    base = torch.zeros(4, 4, device="neuron")
    base.t()[0].fill_(1.0)
    base[:, 1].add_(2.0)
    expected = torch.zeros(4, 4)
    expected.t()[0].fill_(1.0)
    expected[:, 1].add_(2.0)
    assert torch.equal(base.cpu(), expected)
    left, right = base.split(2)
    right.mul_(0)
    assert base.cpu()[2:].abs().sum().item() == 0


def test_out_variant_resizes_device_tensor():
    out = torch.empty(0, device="neuron")
    torch.add(torch.ones(3, device="neuron"), 1, out=out)
    assert out.shape == (3,) and out.cpu().tolist() == [2.0, 2.0, 2.0]


def test_mixing_cpu_and_neuron_raises_device_mismatch():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*neuron:0 and cpu"):
        torch.ones(3) + torch.ones(3, device="neuron")


def test_save_load_and_deepcopy_keep_values_on_device():
    model = nn.Linear(4, 3).to("neuron")
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    assert state["weight"].device.type == "neuron"
    assert torch.equal(state["weight"].cpu(), model.weight.cpu())
    clone = copy.deepcopy(model)
    assert clone.weight.device.type == "neuron"
    assert clone.weight.data_ptr() != model.weight.data_ptr()
    assert torch.equal(clone.weight.cpu(), model.weight.cpu())


def test_autocast_bf16_on_neuron():
    model = nn.Linear(8, 8).to("neuron")
    x = torch.randn(2, 8, device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        y = model(x)
        probabilities = torch.softmax(y, dim=-1)
    assert y.dtype == torch.bfloat16
    assert probabilities.dtype == torch.float32
    assert torch.neuron.get_amp_supported_dtype() == [torch.float32, torch.float16, torch.bfloat16]


def test_device_module_api():
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == 64  # a simulated trn2.48xlarge at LNC=2
    assert torch.neuron.get_device_name(3) == "neuron:3"
    props = torch.neuron.get_device_properties(0)
    assert props.name == "trn2" and props.total_memory == 24 * 2**30
    assert torch.neuron.is_bf16_supported()
    torch.neuron.set_device(5)
    assert torch.neuron.current_device() == 5
    with torch.neuron.device(2):
        assert torch.neuron.current_device() == 2
    assert torch.neuron.current_device() == 5
    torch.neuron.set_device(0)
    torch.neuron.synchronize()


@pytest.mark.parametrize("bad", [64, -1, torch.device("neuron:99")])  # a string is a TypeError (test_api_shapes)
def test_bad_device_index_raises_value_error(bad):
    with pytest.raises(ValueError, match="Invalid device id"):
        torch.neuron.set_device(bad)


def test_memory_accounting_follows_tensor_lifetimes():
    torch.neuron.reset_peak_memory_stats()
    before = torch.neuron.memory_allocated()
    block = torch.empty(1024, 1024, device="neuron")  # 4 MiB
    assert torch.neuron.memory_allocated() - before == 4 * 2**20
    assert torch.neuron.max_memory_allocated() >= before + 4 * 2**20
    assert torch.neuron.memory_stats()["allocated_bytes"]["current"] == torch.neuron.memory_allocated()
    free, total = torch.neuron.mem_get_info()
    assert total == 24 * 2**30 and free == total - torch.neuron.memory_allocated()
    del block
    assert torch.neuron.memory_allocated() == before
    assert "allocated" in torch.neuron.memory_summary()


def test_rng_is_seeded_like_cpu():
    torch.manual_seed(123)  # random ops are host kernels drawing from the host generator, as S's CPU fallbacks
    on_device = torch.randn(5, device="neuron").cpu()
    torch.manual_seed(123)
    assert torch.equal(on_device, torch.randn(5))
    state = torch.get_rng_state()
    first = torch.rand(3, device="neuron").cpu()
    torch.set_rng_state(state)
    assert torch.equal(first, torch.rand(3, device="neuron").cpu())


def test_streams_map_onto_the_default_queue_and_events_time():
    stream = torch.neuron.Stream()
    assert stream.stream_id == 0 and stream == torch.neuron.default_stream()
    with torch.neuron.stream(stream):
        assert torch.neuron.current_stream() is stream
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    torch.ones(100, device="neuron").sum()
    end.record()
    end.synchronize()
    assert start.query() and end.elapsed_time(start) <= 0 <= start.elapsed_time(end)
    with pytest.raises(RuntimeError, match="enable_timing"):
        torch.neuron.Event().elapsed_time(end)


def test_streams_are_torch_streams_as_the_sources_are():
    """S csrc/Stream.cpp:439-442 (`_NeuronStreamBase` subclasses torch.Stream) and torch_neuronx/streams.py."""
    current = torch.neuron.current_stream()
    assert isinstance(current, torch.Stream) and isinstance(torch.neuron.Stream(), torch.Stream)
    assert (current.stream_id, current.device_index, current.device_type) == (0, 0, torch.Stream(device="neuron").device_type)
    assert current.device == torch.device("neuron", 0) and current == torch.neuron.default_stream(0)
    assert hash(current) == hash(torch.neuron.default_stream("neuron")) and torch.neuron.Stream(priority=-1).priority == -1
    rebuilt = torch.neuron.Stream(stream_id=0, device_index=0, device_type=current.device_type)
    assert rebuilt == current and rebuilt.priority == 0
    stream = torch.neuron.Stream()
    with stream:
        assert torch.neuron.current_stream() is stream
    with torch.neuron.stream(stream):
        assert torch.neuron.current_stream() is stream
    assert torch.neuron.current_stream() is not stream
    torch.neuron.set_stream(None)  # S __init__.py:329-332: nothing changes
    stream.wait_stream(current)
    assert stream.record_event().query() and stream.query()
    with pytest.raises(RuntimeError, match="Expected a Neuron event"):  # S Stream.cpp:102
        stream.wait_event(torch.Event())
    with pytest.raises(RuntimeError, match="Expected Neuron device, got: cpu"):  # S Stream.cpp:53
        torch.neuron.Stream("cpu")


def test_record_stream_takes_neuron_streams_and_refuses_others():
    """S csrc/aten/RecordStream.cpp:10-19 (registered at csrc/core/NeuronBindings.cpp:442), and the errors
    S's tests/streams/test_record_stream.py:61-80 expect."""
    tensor = torch.ones(3, device="neuron")
    tensor.record_stream(torch.neuron.current_stream())
    tensor.record_stream(torch.neuron.Stream())
    tensor.record_stream(torch.Stream(device="neuron"))
    with pytest.raises(NotImplementedError, match="Could not run 'aten::record_stream' with arguments from the 'CPU'"):
        torch.ones(3).record_stream(torch.neuron.current_stream())
    with pytest.raises(RuntimeError, match="record_stream: expected neuron stream, but got device type: cpu"):
        tensor.record_stream(torch.Stream(device="cpu"))
    with pytest.raises(RuntimeError, match="unknown parameter type"):
        tensor.record_stream(None)


def test_op_tracking_records_native_and_fallback_ops():
    x = torch.randn(4, 4).to("neuron")
    torch_neuronx.clear_op_tracking()
    (x @ x).relu()
    torch.cumprod(x, dim=0)  # no native Neuron lowering: silent CPU fallback
    assert {"aten::mm", "aten::relu"} <= set(torch_neuronx.get_executed_ops())
    assert torch_neuronx.get_fallback_ops() == ["aten::cumprod.out"]  # the overload its composite calls, as S's fallback names it
    torch_neuronx.clear_op_tracking()
    assert not torch_neuronx.get_fallback_ops() and not torch_neuronx.get_executed_ops()


def test_neff_cache_compiles_once_per_shape():
    stats = torch.neuron.neff_cache_stats
    a, b = torch.randn(3, 5, device="neuron"), torch.randn(3, 5, device="neuron")
    torch.sub(a, b)
    first = stats()
    torch.sub(b, a)  # same op, shapes and dtypes: a cache hit
    second = stats()
    assert second["entries"] == first["entries"] and second["hits"] == first["hits"] + 1
    c = torch.randn(7, device="neuron")  # normal_ has no lowering: a fallback, no NEFF
    torch.sub(c, 1.5)  # a new shape: one more NEFF
    third = stats()
    assert third["entries"] == second["entries"] + 1 and third["misses"] + third["disk_hits"] > 0
    torch.sub(c, 2.5)  # scalars are 0-d inputs: a new value does not recompile
    assert stats()["entries"] == third["entries"]


def test_dataloader_with_pinned_memory_feeds_the_device():
    data = torch.utils.data.TensorDataset(torch.randn(8, 3))
    loader = torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True)
    batches = [batch.to("neuron") for (batch,) in loader]
    assert len(batches) == 2 and batches[0].device.type == "neuron"


def test_advanced_indexing_with_none_and_index_tensors():
    host = torch.arange(24.0).reshape(2, 3, 4)
    index = torch.tensor([2, 0])
    on_device = host.to("neuron")
    assert torch.equal(on_device[None, :, index, None].cpu(), host[None, :, index, None])
    on_device[:, index] = 0.0
    host[:, index] = 0.0
    assert torch.equal(on_device.cpu(), host)
