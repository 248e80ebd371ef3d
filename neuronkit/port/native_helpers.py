"""Native forms of the torch_xla calls `neuronkit port` rewrites where no single PyTorch expression does the
same (the `helpers` of neuronkit/data/xla_port_rules.toml). Each definition a rewritten file calls is copied
into it, after its imports, with the definitions it uses: plain PyTorch and the standard library only, so
the ported script runs on Trainium without neuronkit (and without torch_xla). Imports are inside the
functions, so a copied definition needs nothing from the file but `torch`.

Kept importable (and tested as a module) so the text copied into scripts is code that has run.
"""

from __future__ import annotations

import torch


def average_gradients(optimizer):
    """What xm.reduce_gradients did: every gradient the optimizer steps averaged over the processes of the
    default process group (PyTorch's data-parallel idiom; nothing to do in a single process)."""
    if not torch.distributed.is_initialized() or torch.distributed.get_world_size() == 1:
        return
    world = torch.distributed.get_world_size()
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is not None:
                torch.distributed.all_reduce(param.grad)
                param.grad.div_(world)


def cpu_tensors(data):
    """What xm.save wrote: `data` with every tensor (in dicts, lists and tuples) copied to the CPU."""
    if isinstance(data, torch.Tensor):
        return data.cpu()
    if isinstance(data, dict):
        return type(data)((key, cpu_tensors(value)) for key, value in data.items())
    if isinstance(data, (list, tuple)):
        return type(data)(cpu_tensors(value) for value in data)
    return data


def to_device(batch, device):
    """`batch` with every tensor (in dicts, lists and tuples) moved to `device`."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return type(batch)((key, to_device(value, device)) for key, value in batch.items())
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(value, device) for value in batch)
    return batch


class DeviceLoader:
    """What torch_xla's MpDeviceLoader did: iterate `loader` with each batch moved to `device` (its prefetch
    settings have no native meaning)."""

    def __init__(self, loader, device, **prefetch_settings):
        self.loader, self.device = loader, device

    def __iter__(self):
        for batch in self.loader:
            yield to_device(batch, self.device)

    def __len__(self):
        return len(self.loader)


def spawn_processes(fn, args=(), nprocs=None, start_method=None, init_process_group=True, **spawn_options):
    """What xmp.spawn did: `fn(index, *args)` in one process per device (`nprocs`, default every visible
    core), each a rank of one process group: its environment as torchrun's (RANK, LOCAL_RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT), and the group made before `fn` runs unless `fn` makes it itself. Processes are
    started with the spawn method whatever `start_method` asked (a forked process cannot start the device)."""
    import os
    import socket

    nprocs = nprocs or torch.accelerator.device_count() or 1
    os.environ.setdefault("MASTER_ADDR", "localhost")
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as sock:
            sock.bind(("localhost", 0))
            os.environ["MASTER_PORT"] = str(sock.getsockname()[1])
    torch.multiprocessing.start_processes(join_process_group, args=(fn, tuple(args), nprocs, init_process_group),
                                          nprocs=nprocs, start_method="spawn")


def join_process_group(index, fn, args, nprocs, init_process_group):
    """One process of spawn_processes: rank `index` of `nprocs`, then `fn(index, *args)`."""
    import os

    os.environ.update(RANK=str(index), LOCAL_RANK=str(index), WORLD_SIZE=str(nprocs), LOCAL_WORLD_SIZE=str(nprocs))
    if init_process_group:
        torch.distributed.init_process_group()
    try:
        fn(index, *args)
    finally:
        if init_process_group and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
