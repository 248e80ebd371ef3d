"""What the real backend does to the runtime when the first `neuron` process group is created.

Modelled on S `torch_neuronx/distributed/backend.py` (`_neuron_runtime_setup`, `_set_rt_visible_cores`) and
`torch_neuronx/csrc/core/NeuronDevice.cpp` (`set_local_world_size`, `set_local_device_start_index`,
`device_count`), S = the pre-release snapshot parmoham-aws/test-repo-parmoham:

- the runtime must not be initialised before `init_process_group` (an assert in the source);
- the local rank comes from `LOCAL_RANK`/`LOCAL_WORLD_SIZE` (torchrun sets both) or, without them, from
  grouping the ranks by host address through the store;
- `NEURON_RT_VISIBLE_CORES` is set to the local rank unless the user set it, so each process sees one
  core ("Attempted to have more than one device per process" otherwise);
- afterwards `device_count()` is the local world size, the process's device (and that of every thread
  that chooses none) is `neuron:<local rank>`, `set_device` accepts that core only, and memory on another
  core fails (`get_vnc_id`, the runtime's allocation): the native runtime's `place_process`
  (csrc/device.cpp) holds this placement.
"""

from __future__ import annotations

import dataclasses
import os
import socket

import torch

from neuronkit.device.simulator import module, native
from neuronkit.device.simulator.config import parse_core_list

_SOURCE = "torch_neuronx/distributed/backend.py"


@dataclasses.dataclass(frozen=True)
class LocalPlacement:
    """Where this rank runs: its local rank is its device index, `neuron:<local_rank>`."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    visible_cores: str

    @property
    def device(self) -> torch.device:
        return torch.device("neuron", self.local_rank)


PLACEMENT: LocalPlacement | None = None  # set once, by the first (default) neuron process group


def runtime_initialized() -> bool:
    """Whether the simulated runtime has started: `torch.neuron.init()` ran or memory was allocated on a core
    (selecting a device does not start it, as in S)."""
    if module.is_initialized():
        return True
    return any(native.counters(index)[3] > 0 for index in range(native.device_count()))


def setup(rank: int, world_size: int, store: torch.distributed.Store) -> LocalPlacement:
    """Apply the real backend's runtime setup for this rank; raise its errors, citing the source."""
    global PLACEMENT
    if runtime_initialized():
        raise RuntimeError(
            "Neuron runtime should not be initialized before the init_process_group "
            f"(the real backend asserts this: {_SOURCE}, _neuron_runtime_setup). Call "
            "dist.init_process_group before creating tensors on neuron; the process group selects "
            "neuron:LOCAL_RANK itself")
    local_rank, local_world_size = _local_rank(rank, world_size, store)
    os.environ.setdefault("NEURON_RT_VISIBLE_CORES", str(local_rank))
    visible = os.environ["NEURON_RT_VISIBLE_CORES"]
    if len(parse_core_list(visible)) != 1:
        raise RuntimeError(
            f"Attempted to have more than one device per process in distributed setup "
            f"(NEURON_RT_VISIBLE_CORES={visible}; the real backend allows one core per process: {_SOURCE}, "
            "_neuron_runtime_setup). Leave NEURON_RT_VISIBLE_CORES unset under torchrun, or give each "
            "process one core")
    if local_rank >= native.device_count():
        raise RuntimeError(
            f"local rank {local_rank} has no simulated core: this machine simulates {native.device_count()} "
            "(NEURON_RT_NUM_CORES / NEURON_RT_VISIBLE_CORES at import); run fewer processes per node")
    native.place_process(local_world_size, local_rank)
    module.set_device(local_rank)
    PLACEMENT = LocalPlacement(rank, world_size, local_rank, local_world_size, visible)
    return PLACEMENT


def _local_rank(rank: int, world_size: int, store: torch.distributed.Store) -> tuple[int, int]:
    """LOCAL_RANK/LOCAL_WORLD_SIZE when the launcher set them, else this host's position among the ranks
    that registered the same address in the store (S `_set_rt_visible_cores`)."""
    local_rank, local_size = os.environ.get("LOCAL_RANK"), os.environ.get("LOCAL_WORLD_SIZE")
    if local_rank is not None and local_size is not None:
        return int(local_rank), int(local_size)
    address = socket.gethostbyname(socket.gethostname())
    store.set(f"neuron_worker_{rank}", f"{address}:{rank}")
    store.wait([f"neuron_worker_{i}" for i in range(world_size)])
    same_host = sorted(i for i in range(world_size)
                       if store.get(f"neuron_worker_{i}").decode().rpartition(":")[0] == address)
    return same_host.index(rank), len(same_host)

