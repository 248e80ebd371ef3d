"""In-place view ops change a tensor's metadata only. Source: S = parmoham-aws/test-repo-parmoham @ 98154b8."""

from __future__ import annotations

import torch
import torch.nn.functional as F

N = "neuron"


def test_as_strided_in_place_restrides_the_device_tensor_itself():
    """S: torch_neuronx/csrc/core/NeuronBindings.cpp:415-443 registers no in-place view op (`as_strided_`,
    `squeeze_`, `transpose_`, ...), so PyTorch's composite kernel restrides the device tensor, as on CPU."""
    x = torch.arange(6.0, device=N)
    y = x.as_strided_((2, 2), (2, 1), 1)
    assert y is x and x.shape == (2, 2) and x.stride() == (2, 1)
    assert torch.equal(x.cpu(), torch.arange(6.0).as_strided_((2, 2), (2, 1), 1))


def test_a_compiled_graph_with_an_in_place_view_runs():
    """S: NeuronBindings.cpp:415-443 (no in-place view registered): AOTAutograd's functionalization replays
    `as_strided_` on its wrappers (Swin's pooler, `adaptive_avg_pool1d` of a transposed tensor), which the
    composite kernel does without touching device memory."""
    x = torch.randn(2, 8, 4)
    compiled = torch.compile(lambda t: F.adaptive_avg_pool1d(t.transpose(1, 2), 1), backend="neuron")
    torch.testing.assert_close(compiled(x.to(N)).cpu(), F.adaptive_avg_pool1d(x.transpose(1, 2), 1))
