"""Data-parallel training started with torch.multiprocessing.spawn, in the style of the distributed-training
tutorials: one process per GPU, each joining the process group itself.

    python main.py --world-size 2 --steps 20

Port corpus: `# must:` lines a person must change for Trainium, `# may:` lines with a right but optional finding.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP


def setup(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    backend = "nccl" if torch.cuda.is_available() else "gloo"  # must: device-choice
    dist.init_process_group(backend, rank=rank, world_size=world_size)


def cleanup():
    dist.destroy_process_group()


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 16)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(16, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def demo_basic(rank, world_size, port, steps):
    print(f"Running basic DDP example on rank {rank}.")
    setup(rank, world_size, port)
    device = torch.device(f"cuda:{rank}") if torch.cuda.is_available() else torch.device("cpu")  # must: device-choice
    torch.manual_seed(0)
    model = ToyModel().to(device)
    ddp_model = DDP(model, device_ids=[rank] if device.type == "cuda" else None)  # may: cuda-check
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.01)
    global_batch = 8
    for step in range(steps):
        g = torch.Generator().manual_seed(step)
        inputs, labels = torch.randn(global_batch, 10, generator=g), torch.randn(global_batch, 5, generator=g)
        inputs, labels = inputs[rank::world_size].to(device), labels[rank::world_size].to(device)
        optimizer.zero_grad()
        loss = loss_fn(ddp_model(inputs), labels)
        loss.backward()
        optimizer.step()
        logged = loss.detach().clone()
        dist.all_reduce(logged)
        if rank == 0:
            print(f"step {step} loss {logged.item() / world_size:.5f}", flush=True)
    cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--world-size", type=int, default=torch.cuda.device_count())  # must: device-count
    parser.add_argument("--port", type=int, default=12355)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    mp.spawn(demo_basic, args=(args.world_size, args.port, args.steps), nprocs=args.world_size, join=True)
