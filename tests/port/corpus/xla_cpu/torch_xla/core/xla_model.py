"""xla_model on the CPU (see torch_xla/__init__.py)."""

import os
import sys

import torch
import torch.distributed as dist

REDUCE_SUM = "sum"


def xla_device(n=None):
    return torch.device("cpu")


def mark_step(wait=False):
    """Cut XLA's lazy graph: eager on the CPU, nothing to do."""


def wait_device_ops(devices=None):
    """Wait for the device: eager on the CPU, nothing to wait for."""


def get_ordinal():
    return dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", 0))


def get_local_ordinal():
    return int(os.environ.get("LOCAL_RANK", get_ordinal()))


def xrt_world_size():
    return dist.get_world_size() if dist.is_initialized() else int(os.environ.get("WORLD_SIZE", 1))


def is_master_ordinal(local=True):
    return (get_local_ordinal() if local else get_ordinal()) == 0


def master_print(*args, fd=sys.stdout, finalizer=None):
    if is_master_ordinal(local=False):
        print(*args, file=fd, flush=True)


def _world_group():
    """XLA's runtime forms the world without torch.distributed: here, gloo from the environment, on first use."""
    if not dist.is_initialized():
        dist.init_process_group("gloo")


def reduce_gradients(optimizer, groups=None, pin_layout=True):
    """Average every gradient over the workers (the guide: xm.optimizer_step adds gradient synchronization)."""
    world = xrt_world_size()
    if world == 1:
        return
    _world_group()
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is not None:
                dist.all_reduce(param.grad)
                param.grad /= world


def optimizer_step(optimizer, barrier=False, optimizer_args={}, groups=None, pin_layout=True):  # noqa: B006
    reduce_gradients(optimizer, groups=groups, pin_layout=pin_layout)
    return optimizer.step(**optimizer_args)


def rendezvous(tag, payload=b"", replicas=[]):  # noqa: B006
    if xrt_world_size() > 1:
        _world_group()
        dist.barrier()


def _cpu(data):
    if isinstance(data, torch.Tensor):
        return data.cpu()
    if isinstance(data, dict):
        return type(data)((k, _cpu(v)) for k, v in data.items())
    if isinstance(data, (list, tuple)):
        return type(data)(_cpu(v) for v in data)
    return data


def save(data, file_or_path, master_only=True, global_master=False):
    if not master_only or is_master_ordinal(local=not global_master):
        torch.save(_cpu(data), file_or_path)


def add_step_closure(closure, args=(), run_async=False):
    closure(*args)
