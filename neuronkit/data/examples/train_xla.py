"""Train a small classifier on Trainium with PyTorch/XLA (torch-neuronx 2.x, XLA-based), written the way the
XLA-era Neuron training guide writes it.

neuronkit's example of a script teams must move to the native backend (Neuron 2.30 ended PyTorch/XLA for
training): the XLA device, a parallel device loader, xm.optimizer_step, mark_step, master_print, xm.save, BF16
through XLA's environment variable. It needs torch_xla to run as written; `neuronkit port` rewrites it to
native PyTorch.

    python train_xla.py --epochs 1                      # one worker (one NeuronCore)
    torchrun --nproc_per_node 2 train_xla.py            # data parallel, one worker per NeuronCore
"""

import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl


class Classifier(nn.Module):
    def __init__(self, features=64, hidden=128, classes=10):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(features, hidden), nn.Linear(hidden, classes)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--save", default="", help="where the trained weights go (none by default)")
    args = parser.parse_args()

    if "WORLD_SIZE" in os.environ:  # torchrun: one worker per NeuronCore, in XLA's process group
        import torch_xla.distributed.xla_backend  # noqa: F401 - registers the "xla" backend
        torch.distributed.init_process_group("xla")
    if os.environ.get("XLA_USE_BF16") == "1":
        print("XLA_USE_BF16=1: the whole model trains in bfloat16")
    device = xm.xla_device()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(1024, 64, generator=g), torch.randint(0, 10, (1024,), generator=g))
    sampler = DistributedSampler(data, num_replicas=xm.xrt_world_size(), rank=xm.get_ordinal()) \
        if xm.xrt_world_size() > 1 else None
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, shuffle=sampler is None)
    model = Classifier().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    for epoch in range(args.epochs):
        model.train()
        for step, (x, y) in enumerate(pl.MpDeviceLoader(loader, device)):
            optimizer.zero_grad()
            loss = F.nll_loss(model(x), y)
            loss.backward()
            xm.optimizer_step(optimizer)  # averages the gradients over the workers, then steps
            xm.mark_step()  # cut the lazy graph: compile and run the step
            if step % 8 == 0:
                xm.master_print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    if args.save:
        xm.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
