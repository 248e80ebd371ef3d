"""The training engine: model, optimizer, a data-parallel wrapper and the loop."""
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from .utils import world


class MLP(nn.Module):
    def __init__(self, features, hidden, layers):
        super().__init__()
        blocks = [nn.Linear(features, hidden), nn.Tanh()]
        for _ in range(layers - 1):
            blocks += [nn.Linear(hidden, hidden), nn.Tanh()]
        self.net = nn.Sequential(*blocks, nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)


class Engine:
    def __init__(self, config, device):
        self.device = device
        self.rank, self.world_size = world()
        model = MLP(config["features"], config["hidden"], config["layers"])
        if device.type == "cuda":  # must: device-guard
            model = model.cuda()  # must: tensor-cuda
        self.model = DistributedDataParallel(model) if self.world_size > 1 else model
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=config["lr"])
        self.batch_size = config["batch_size"]
        self.features = config["features"]

    def batch(self, step):
        """Step `step`'s global batch (the same on every process); this process takes its share."""
        g = torch.Generator().manual_seed(step)
        x = torch.randn(self.batch_size, self.features, generator=g)
        y = x.sum(dim=1, keepdim=True).sin()
        x, y = x[self.rank::self.world_size], y[self.rank::self.world_size]
        if self.device.type == "cuda":  # must: device-guard
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)  # must: tensor-cuda; may: non-blocking
        return x, y

    def fit(self, steps):
        for step in range(steps):
            x, y = self.batch(step)
            loss = nn.functional.mse_loss(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if self.rank == 0:
                print(f"step {step} loss {loss.item():.5f}", flush=True)
        if torch.cuda.is_available():  # may: device-guard
            torch.cuda.synchronize()  # must: synchronize
