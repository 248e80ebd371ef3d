"""A CPU stand-in for the parts of PyTorch/XLA (torch-neuronx 2.x) the port corpus uses, for the tests only: the
corpus's XLA scripts run on it to give the CPU reference their ported form is held to. It models what the
XLA-era Neuron training guide documents (frameworks/torch/torch-neuronx/programming-guide/training/ in
aws-neuron/aws-neuron-sdk, before 2.32) on the CPU: the device is the CPU, mark_step does nothing (eager),
xm.optimizer_step averages the gradients over the workers before stepping, xmp.spawn starts one process per
worker in one world, and the "xla" process group is gloo. Nothing here is torch_xla's code."""

import torch

from torch_xla import core, distributed, runtime  # noqa: F401


def device():
    return torch.device("cpu")


def sync():
    """torch_xla.sync(): cut the lazy graph (nothing to do eagerly)."""
