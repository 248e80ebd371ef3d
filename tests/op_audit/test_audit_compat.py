"""`neuronkit audit --compat` and the audit record's `apis`: a tiny model's public PyTorch calls, each in
AWS's compatibility-table vocabulary, classified by the ATen ops its calls ran."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from neuronkit import cli
from neuronkit.op_audit import audit


class Tiny(nn.Module):
    """A linear layer (native), torch.roll (a CPU fallback), .item() (a host read) and .shape (metadata)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.roll(self.lin(x), 1, 0)
        scale = y.abs().max().item() + x.shape[0]
        return y / scale


def test_a_tiny_models_public_apis_in_the_public_vocabulary() -> None:
    report = audit(Tiny(), torch.randn(2, 4))
    rows = {f"{a.namespace}.{a.api}": a for a in report.apis}
    roll = rows["torch.roll"]
    assert (roll.status, roll.aten_ops, roll.dtypes, roll.calls) == ("CPU_FALLBACK", ["aten::roll"], ["float32"], 1)
    assert roll.how == "aten::roll: no native Neuron lowering"
    assert rows["torch.nn.functional.linear"].status == "Y" and rows["torch.nn.functional.linear"].how == "Native"
    item = rows["torch.Tensor.item"]
    assert (item.status, item.how, item.aten_ops) == ("Y", "Host-only (reads tensor values back to the host)",
                                                      ["aten::_local_scalar_dense"])
    assert rows["torch.Tensor.shape"].how == "Host-only (its calls here ran no ATen op)"
    assert rows["torch.Tensor.div"].how == "Native"  # `y / scale`: PyTorch names Tensor.__truediv__ so
    assert report.apis[0].api == "roll"  # what a team must act on comes first
    assert "torch.roll" in report.compat_table() and "CPU_FALLBACK" in report.compat_table()
    assert report.to_dict()["apis"][0]["status"] == "CPU_FALLBACK"


def test_a_blocked_call_is_N_and_a_backward_is_attributed_to_tensor_backward() -> None:
    model = nn.LSTM(4, 4)  # the device cannot run the fused cell: a blocker
    report = audit(model, (torch.randn(3, 1, 4),), backward=True)
    rows = {f"{a.namespace}.{a.api}": a for a in report.apis}
    assert rows["torch.lstm"].status == "N" and "LSTM" in rows["torch.lstm"].how
    assert "torch.Tensor.backward" in rows


def test_the_cli_lists_the_apis(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["audit", "tiny-bert", "--compat", "--seq-len", "8"])
    out = capsys.readouterr().out
    assert code == 0
    assert "public PyTorch APIs called (forward), as AWS's compatibility table classifies them" in out
    line = next(line for line in out.splitlines() if "torch.nn.functional.linear" in line)
    assert line.split()[1:2] == ["Y"] and line.rstrip().endswith("Native")
