"""Collectives in the profiler: one `neuron::<collective>` range per call, with the bytes it moves.

The process group opens each range with the collective's byte count and group size as its recorded
arguments (`_record_function_with_args_enter`), so with `record_shapes=True` (the workbook profiler's
default) the Chrome trace shows them as the event's "Concrete Inputs" and `FunctionEvent.concrete_inputs`
holds them. PyTorch's own `record_param_comms` ranges carry the same facts for NCCL, from C++ only.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

PREFIX = "neuron::"


@contextmanager
def collective_range(kind: str, nbytes: int, group_size: int) -> Iterator[None]:
    """Profile one collective as `neuron::<kind>` with (bytes, group size) as its arguments."""
    handle = torch._C._autograd._record_function_with_args_enter(PREFIX + kind, nbytes, group_size)
    try:
        yield
    finally:
        torch._C._autograd._record_function_with_args_exit(handle)


def collective_events(prof: torch.profiler.profile) -> list[dict[str, object]]:
    """The collectives a finished profile saw: kind, bytes and group size (bytes need record_shapes)."""
    found = []
    for event in prof.events():
        if event.name.startswith(PREFIX) and event.name.count("::") == 1:
            inputs = list(event.concrete_inputs or [])
            nbytes, size = (inputs + [None, None])[:2]
            found.append({"kind": event.name[len(PREFIX):], "bytes": nbytes, "group_size": size})
    return found
