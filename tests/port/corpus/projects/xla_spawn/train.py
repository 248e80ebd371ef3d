"""Data-parallel training with PyTorch/XLA's multiprocessing and DistributedDataParallel, as PyTorch/XLA's
DDP guide writes it: xmp.spawn one process per device, the xla:// process group, an XLA device loader.

    python train.py --num-cores 2

Port corpus: `# must:` lines a person must change for the native backend, `# may:` lines with a right but
optional finding.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import torch_xla  # must: xla-import
import torch_xla.core.xla_model as xm  # must: xla-import
import torch_xla.distributed.parallel_loader as pl  # must: xla-import
import torch_xla.distributed.xla_backend  # noqa: F401  # must: xla-import
import torch_xla.distributed.xla_multiprocessing as xmp  # must: xla-import


def _mp_fn(index, flags):
    dist.init_process_group("xla", init_method="xla://")  # must: xla-string xla-init-method
    device = torch_xla.device()  # must: xla-device
    torch.manual_seed(flags.seed)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(device)
    ddp_model = DDP(model, gradient_as_bucket_view=True)
    g = torch.Generator().manual_seed(flags.seed)
    dataset = TensorDataset(torch.randn(128, 16, generator=g), torch.randn(128, 4, generator=g))
    sampler = DistributedSampler(dataset, num_replicas=xm.xrt_world_size(), rank=xm.get_ordinal(), shuffle=False)  # must: world-size ordinal
    loader = DataLoader(dataset, batch_size=flags.batch_size // xm.xrt_world_size(), sampler=sampler)  # must: world-size
    optimizer = torch.optim.Adam(ddp_model.parameters(), lr=1e-3)
    for step, (x, y) in enumerate(pl.MpDeviceLoader(loader, device)):  # must: mp-device-loader
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(ddp_model(x), y)
        loss.backward()
        optimizer.step()
        xm.mark_step()  # must: mark-step
        xm.master_print(f"step {step} loss {loss.item():.5f}")  # must: master-print
    xm.rendezvous("training_end")  # must: rendezvous
    if xm.is_master_ordinal():  # must: is-master
        xm.save(ddp_model.module.state_dict(), "model.pt")  # must: xla-save


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-cores", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    flags = parser.parse_args()
    xmp.spawn(_mp_fn, args=(flags,), nprocs=flags.num_cores)  # must: xmp-spawn
