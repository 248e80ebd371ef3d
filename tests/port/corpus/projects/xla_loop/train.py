"""An MLP trained on Trainium with PyTorch/XLA (torch-neuronx 2.x), as the XLA-era Neuron training guide and
its MLP tutorial write it: the XLA device, a parallel loader, xm.optimizer_step and mark_step. One worker, or
data parallel under torchrun.

    python train.py --epochs 1
    torchrun --nproc_per_node=2 train.py

Port corpus: `# must:` lines a person must change for the native backend, `# may:` lines with a right but
optional finding.
"""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import torch_xla.core.xla_model as xm  # must: xla-import
import torch_xla.distributed.parallel_loader as pl  # must: xla-import


class MLP(nn.Module):
    def __init__(self, input_size=28 * 28, output_size=10, layers=(120, 84)):
        super().__init__()
        self.fc1 = nn.Linear(input_size, layers[0])
        self.fc2 = nn.Linear(layers[0], layers[1])
        self.fc3 = nn.Linear(layers[1], output_size)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return F.log_softmax(self.fc3(x), dim=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast on the XLA device")
    args = parser.parse_args()

    if "WORLD_SIZE" in os.environ:
        import torch_xla.distributed.xla_backend  # noqa: F401  # must: xla-import
        torch.distributed.init_process_group("xla")  # must: xla-string
    device = xm.xla_device()  # must: xla-device
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    dataset = TensorDataset(torch.randn(256, 28 * 28, generator=g), torch.randint(0, 10, (256,), generator=g))
    sampler = None
    if xm.xrt_world_size() > 1:  # must: world-size
        sampler = DistributedSampler(dataset, num_replicas=xm.xrt_world_size(), rank=xm.get_ordinal(), shuffle=False)  # must: world-size ordinal
    train_loader = DataLoader(dataset, batch_size=args.batch_size // xm.xrt_world_size(), sampler=sampler)  # must: world-size
    model = MLP().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.NLLLoss()

    for epoch in range(args.epochs):
        parallel_loader = pl.MpDeviceLoader(train_loader, device)  # must: mp-device-loader
        for idx, (train_x, train_label) in enumerate(parallel_loader):
            optimizer.zero_grad()
            with torch.autocast(device_type="xla", dtype=torch.bfloat16, enabled=args.bf16):  # must: xla-string
                output = model(train_x)
            loss = loss_fn(output, train_label)
            loss.backward()
            xm.optimizer_step(optimizer)  # must: optimizer-step
            xm.mark_step()  # must: mark-step
            if idx % 4 == 0:
                xm.master_print(f"epoch {epoch} step {idx} loss {loss.detach().item():.5f}")  # must: master-print
    xm.save(model.state_dict(), os.path.join(os.environ.get("CHECKPOINT_DIR", "."), "checkpoint.pt"))  # must: xla-save
    xm.master_print("done")  # must: master-print


if __name__ == "__main__":
    main()
