"""`nki.isa.constants`: the enumerations ISA instructions take (engine, DMA and matmul modes, NeuronCore
versions). The interpreter accepts every member; what it does with each is in docs/nki.md."""

from __future__ import annotations

import enum


class engine(enum.Enum):  # noqa: N801 - NKI's spelling
    """The engine an instruction runs on (`engine=`); the interpreter's result is the same on each."""

    unknown = 0
    tensor = 1
    vector = 2
    scalar = 3
    gpsimd = 4
    sync = 5


class oob_mode(enum.Enum):  # noqa: N801
    """What a DMA does with an out-of-bounds (indirect) address: fault, or skip the element."""

    error = 0
    skip = 1


class dge_mode(enum.Enum):  # noqa: N801
    """Which descriptor-generation path a DMA uses (software or hardware DGE); timing only."""

    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class dma_engine(enum.Enum):  # noqa: N801
    """The queue a DMA is issued on; timing only."""

    dma = 0
    gpsimd_dma = 1


class reduce_cmd(enum.Enum):  # noqa: N801
    """The accumulate-register command of an instruction that also reduces (activation_reduce...)."""

    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3


class matmul_perf_mode(enum.Enum):  # noqa: N801
    """Tensor Engine performance modes of nc_matmul; the result is the same."""

    none = 0
    double_row = 1
    double_row_gen3 = 2


class nc_version(enum.IntEnum):  # noqa: N801
    """NeuronCore generations: gen2 is trn1/inf2, gen3 trn2, gen4 trn3."""

    gen2 = 2
    gen3 = 3
    gen4 = 4
