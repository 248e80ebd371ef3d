"""DDP communication hooks on the `neuron` process group (fidelity review §5.7)."""

from __future__ import annotations

import pytest
import torch

MESSAGE = "Neuron backend doesn't support acquiring a stream from pool"


def test_a_callback_on_a_device_future_gets_no_pooled_stream():
    """S: tests/pytorch_tests/specs/ddp_spec.json:113,149 records every DDP comm-hook test (allreduce_hook,
    fp16_compress_hook, PowerSGD, `then` hooks) failing with this error; a hook chains `Future.then` on its
    collective's future, whose callback asks the device for a stream from the pool. The `neuron` process
    group's futures are device futures as S's are (test_distributed.py runs a hooked DDP on two ranks); a
    future on the host still takes callbacks."""
    future = torch.futures.Future(devices=["neuron:0"])
    chained = future.then(lambda f: f.value() * 2)
    with pytest.raises(RuntimeError, match=MESSAGE):
        future.set_result(torch.ones(2, device="neuron"))
    host = torch.futures.Future()
    doubled = host.then(lambda f: f.value() * 2)
    host.set_result(torch.ones(2))
    assert torch.equal(doubled.wait(), torch.full((2,), 2.0))
    del chained
