"""Host work inside ops the device runs natively (fidelity review §2, §5.6)."""

from __future__ import annotations

import torch
from torch import nn

import neuronkit.profiling
from neuronkit.op_audit import audit


class _Gather(nn.Module):
    """index_select (a bounds check on the host per call) and a column x[:, 0] (select_backward in backward)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x @ self.weight
        return h[:, 0] + torch.index_select(h, 1, torch.tensor([1, 2], device=h.device)).sum(1)


def test_host_syncs_and_round_trips_are_host_transfers_in_the_audit():
    """S: python_ops/torch_mlir/ops/indexing.py:60 (index_select's bounds check, torch.any on the host before
    every call; TORCH_NEURONX_SKIP_OP_PRECONDITIONS=1 skips it) and csrc/aten/TensorShape.cpp:102-113
    (select_backward: a native C++ kernel that copies to the CPU and back, logging nothing). Both run
    natively; the audit reports each as a host transfer (info) with its remedy, and the op as native."""
    report = audit(_Gather(), torch.randn(3, 4), backward=True)
    sync, = report.findings_in("host_sync")
    trip, = report.findings_in("host_round_trip")
    assert (sync.op, sync.severity, trip.op, trip.severity) == (
        "aten::index_select", "info", "aten::select_backward", "info")
    assert "SKIP_OP_PRECONDITIONS" in sync.remedy and "slice_backward" in trip.remedy
    assert report.op("aten::index_select").classification == "native"
    assert report.op("aten::select_backward").classification == "native"
    assert report.summary.fallbacks == [] and report.summary.blockers == []


def test_host_transfers_are_counted_in_the_profile(tmp_path):
    """S: indexing.py:60 and TensorShape.cpp:102-113: the profile's per-op summary counts the calls with host
    work (`host_transfers`) and the bytes a round trip copies (`host_bytes`); its attrs list them beside the
    fallbacks, which stay empty."""
    model = _Gather().to("neuron")
    x = torch.randn(3, 4, device="neuron")
    top = neuronkit.profiling.profile(model, x, steps=1, warmup=3, output_dir=tmp_path)
    rows = top.set_index("name")
    assert rows.loc["aten::index_select", "host_transfers"] == 1 and rows.loc["aten::index_select", "host_bytes"] == 0
    assert rows.loc["aten::mm", "host_transfers"] == 0
    assert top.attrs["host_transfers"] == [{"name": "aten::index_select", "calls": 1, "bytes_copied": 0}]
    assert top.attrs["fallbacks"] == []
