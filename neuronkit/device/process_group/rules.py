"""The real backend's limits on collectives, each raised with the error the device gives and its source.

S = the pre-release snapshot parmoham-aws/test-repo-parmoham. The device runs collectives as XLA
collective ops over replica groups; the limits below are where that shows through PyTorch's API.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

_SPECS = "tests/pytorch_tests/specs/common_c10d_spec.json"
_BACKEND = "torch_neuronx/distributed/backend.py"
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)


def check_all_to_all(group_size: int, world_size: int) -> None:
    """all_to_all: never 2 processes; group sizes 4, 8, 16 or multiples of 32; the group must divide the
    world, since the device builds one replica group per slice of the world."""
    if group_size == 2:
        raise RuntimeError(f"Neuron does not support 2 process all_to_all (S {_SPECS}, test_c10d_spawn_nccl "
                           "xfail); use 4 or more ranks, or all_gather + slicing")
    if group_size > 1 and group_size not in (4, 8, 16) and group_size % 32:
        raise RuntimeError(f"Neuron does not support an all_to_all replica group of {group_size} ranks: "
                           f"supported sizes are 4, 8, 16 and multiples of 32 (S {_SPECS}, "
                           "NcclProcessGroupWithDispatchedCollectivesTests xfail)")
    if world_size % group_size:
        raise ValueError(f"Cannot create global_replica_group when world_size:{world_size} is not divisible "
                         f"by group_size: {group_size} (S {_BACKEND}, alltoall)")


def check_splits(splits: Sequence[int] | None, name: str, group_size: int) -> None:
    """all_to_all_single: only no split sizes or all ones; any other list fails, even equal chunks larger
    than one row (S backend.py, alltoall_base `_validate_split_sizes`)."""
    if not splits or all(size == 1 for size in splits):
        return
    if len(splits) != group_size:
        raise NotImplementedError(f"alltoall_base: {name}_split_sizes length ({len(splits)}) must match "
                                  f"group_size ({group_size}) (S {_BACKEND})")
    raise NotImplementedError(f"alltoall_base: Only even split sizes are supported. Got {name}_split_sizes: "
                              f"{list(splits)} (S {_BACKEND}: pass no split sizes for equal chunks)")


def check_dtypes(tensors: Sequence[torch.Tensor]) -> None:
    """No float8 collectives on the device (S specs/common_c10d_spec.json: allgather float8 xfail)."""
    for tensor in tensors:
        if tensor.dtype in _FP8:
            raise RuntimeError(f"Neuron collectives do not support dtype {tensor.dtype} (S {_SPECS}); "
                               "cast to bfloat16 before the collective")


def not_supported(what: str) -> NotImplementedError:
    """A collective the real process group leaves unimplemented (S backend.py raises NotImplementedError)."""
    return NotImplementedError(f"{what} is not implemented by the neuron process group (S {_BACKEND})")


def premul_sum_not_modelled(what: str) -> NotImplementedError:
    """PREMUL_SUM outside all_reduce and reduce_scatter: S pre-multiplies only there (utils.py:63-89
    `parse_and_update_inputs`, called from backend.py:528, 888, 971) and hands other collectives the op
    unchanged, whose device outcome the source does not show."""
    return NotImplementedError(f"{what} with ReduceOp.PREMUL_SUM is not modelled: the neuron process group "
                               "pre-multiplies only in all_reduce and reduce_scatter (S torch_neuronx/distributed/"
                               "utils.py parse_and_update_inputs); multiply the input, then reduce with SUM")
