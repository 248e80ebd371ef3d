"""The "xla" process-group backend and the xla:// rendezvous on the CPU: gloo, and the environment's world."""

import sys

import torch.distributed as dist

import torch.distributed.rendezvous  # noqa: F401 - the module (torch.distributed.rendezvous is also a function)

rendezvous = sys.modules["torch.distributed.rendezvous"]


def _gloo(store, rank, size, timeout):
    return dist.ProcessGroupGloo(store, rank, size, timeout)


def _xla_rendezvous(url, timeout, **kwargs):
    return rendezvous._env_rendezvous_handler("env://", timeout, **kwargs)


if "xla" not in dist.Backend.backend_list:
    dist.Backend.register_backend("xla", _gloo, devices=["cpu"])
    rendezvous.register_rendezvous_handler("xla", _xla_rendezvous)
