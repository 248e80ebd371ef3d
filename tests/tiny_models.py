"""Small models the tests share (imported through conftest: `from conftest import TwoLayerMLP`)."""

from __future__ import annotations

import torch
from torch import nn


class TwoLayerMLP(nn.Module):
    """A small model that compiles to one graph: Linear -> ReLU -> Linear, 8 -> 16 -> 4."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))
