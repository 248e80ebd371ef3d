"""xmp.spawn on the CPU: one process per worker, in one world (the environment torchrun would give)."""

import os
import socket

import torch.distributed as dist
import torch.multiprocessing as mp


def _worker(index, fn, args, nprocs, port):
    os.environ.update(RANK=str(index), LOCAL_RANK=str(index), WORLD_SIZE=str(nprocs),
                      LOCAL_WORLD_SIZE=str(nprocs), MASTER_ADDR="localhost", MASTER_PORT=str(port))
    try:
        fn(index, *args)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def spawn(fn, args=(), nprocs=None, start_method="spawn"):
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        port = sock.getsockname()[1]
    nprocs = nprocs or 1
    mp.start_processes(_worker, args=(fn, args, nprocs, port), nprocs=nprocs, start_method=start_method)
