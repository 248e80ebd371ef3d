"""Device and process set-up, the way training packages keep it out of the entry script."""
import os

import torch
import torch.distributed as dist


def setup_device():
    """The device of this process, and (under torchrun) the process group, with the backend CUDA uses."""
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if "WORLD_SIZE" in os.environ:
        torch.cuda.set_device(local_rank)  # must: set-device
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")  # must: device-choice
    if torch.cuda.is_available():  # must: device-guard
        return torch.device("cuda", local_rank)  # must: device-string
    return torch.device("cpu")


def world():
    """(rank, world size) of this process."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def seed_everything(seed):
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)  # must: manual-seed-all
