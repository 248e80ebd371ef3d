"""A tiny LightningModule as a team writes one (nothing from neuronkit), shared by the in-process Lightning tests
and the torchrun script (tests/clients/lightning_ddp.py)."""

from __future__ import annotations

import lightning.pytorch as pl
import torch


def dataset() -> torch.utils.data.TensorDataset:
    """16 fixed samples of a regression: 8 features, one target."""
    generator = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(16, 8, generator=generator), torch.randn(16, 1, generator=generator))


class Regression(pl.LightningModule):
    """A two-layer MLP trained with SGD on mean squared error; it notes each step's loss, and the devices and
    dtypes its layers computed in."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        self.losses: list[float] = []
        self.devices: set[str] = set()
        self.dtypes: set[torch.dtype] = set()

    def training_step(self, batch: list[torch.Tensor], index: int) -> torch.Tensor:
        features, target = batch
        prediction = self.net(features)
        self.devices.add(str(prediction.device))
        self.dtypes.add(prediction.dtype)
        loss = torch.nn.functional.mse_loss(prediction.float(), target)
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)
