"""An ESTIMATE of a kernel's time on a NeuronCore's engines, from the instructions the interpreter executes.

Each instruction is charged to its engine (Tensor, Vector, Scalar, GpSimd) with the "Estimated
instruction cost" formula of the NKI ISA reference, in that engine's cycles, converted to time with the
engine's clock; DMA transfers (`nl.load`, `nl.store`, `nisa.dma_copy`, `nisa.dma_transpose`) are charged
their bytes over one NeuronCore's share of the chip's DMA bandwidth. The figures and their sources are
in `neuronkit/data/nki_hardware.toml` ([engine_cost]).

Engines run their instruction streams in parallel, so a kernel takes at least its busiest engine's time.
The estimate is `max(compute engines) + DMA`: compute engines fully overlapped with one another, DMA not
overlapped with compute (a kernel that prefetches hides part of it). The instructions of an SPMD grid's
programs add up on each engine, as if one NeuronCore ran them all. Not modelled: dependencies between engines (semaphore waits), DMA fixed latency (not
documented), PSUM/SBUF access conflicts. It is an estimate, never a measurement.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from neuronkit.nki import context
from neuronkit.resources import data_toml

ENGINES = ("tensor", "vector", "scalar", "gpsimd")
RULE = "max over the compute engines + DMA (compute engines overlapped, DMA not overlapped)"


@dataclass(frozen=True)
class Figures:
    """The cost model's figures (neuronkit/data/nki_hardware.toml [engine_cost])."""

    target: str
    min_ii: int
    gpsimd_start: int
    matmul_stationary_floor: int
    matmul_fp32_factor: int
    dma_bytes_per_s: float
    dma_fixed_ns: str | float
    clock_ghz: dict[str, float]
    instructions: dict[str, dict[str, Any]]


@functools.cache
def figures() -> Figures:
    """The figures as the data file gives them."""
    table = data_toml("nki_hardware.toml")["engine_cost"]
    return Figures(**table)


@dataclass(frozen=True)
class EngineEstimate:
    """The ESTIMATED engine time of one kernel launch: per-engine busy time, DMA time, and the kernel's
    estimate under `rule`."""

    engine_ns: dict[str, float]  # busy time per compute engine
    dma_ns: float
    dma_bytes: int
    instructions: dict[str, int]  # instruction -> times executed
    target: str
    total_ns: float  # the estimate under `rule`
    rule: str = RULE
    not_modelled: str = "waits between engines"

    def as_dict(self) -> dict[str, Any]:
        """Numbers with their unit in the key, for traces and records."""
        return {"estimate_us": round(self.total_ns / 1000, 4),
                **{f"{e}_us": round(ns / 1000, 4) for e, ns in self.engine_ns.items()},
                "dma_us": round(self.dma_ns / 1000, 4), "dma_bytes": self.dma_bytes, "target": self.target,
                "rule": self.rule, "not_modelled": self.not_modelled}


@dataclass
class Ledger:
    """What one launch's instructions cost so far, per engine (cycles) and for DMA (bytes)."""

    cycles: Counter = field(default_factory=Counter)
    dma_bytes: int = 0
    counts: Counter = field(default_factory=Counter)

    def estimate(self) -> EngineEstimate:
        fig = figures()
        engine_ns = {e: self.cycles[e] / fig.clock_ghz[e] for e in ENGINES}
        dma_ns = self.dma_bytes / fig.dma_bytes_per_s * 1e9
        return EngineEstimate(engine_ns, dma_ns, self.dma_bytes, dict(self.counts), fig.target,
                              max(engine_ns.values()) + dma_ns,
                              not_modelled=f"DMA fixed latency ({fig.dma_fixed_ns}), waits between engines")


def per_partition(shape: tuple[int, ...]) -> int:
    """Elements per partition of a tile of `shape` (its first dimension is the partition dimension)."""
    return math.prod(shape[1:]) if len(shape) > 1 else 1


def charge(instruction: str, shape: tuple[int, ...], engine: Any = None) -> None:
    """Charge one `instruction` on a tile of `shape` (N = its elements per partition), on its engine or on
    `engine` (an nki.isa engine constant, where the instruction takes one)."""
    ledger = context.current().ledger
    row = figures().instructions[instruction]
    n = per_partition(tuple(shape))
    cycles = max(row.get("floor", 0), row["per_element"] * n) + row.get("extra", 0)
    ledger.cycles[_engine(engine, row["engine"])] += cycles
    ledger.counts[instruction] += 1


def _engine(requested: Any, default: str) -> str:
    name = getattr(requested, "name", None)
    return name if name in ENGINES else default


def charge_matmul(stationary_shape: tuple[int, ...], moving_shape: tuple[int, ...], float32: bool,
                  instruction: str = "nc_matmul") -> None:
    """nc_matmul: max(min(64, N_stationary), N_moving) Tensor Engine cycles, 4x for float32 operands."""
    ledger = context.current().ledger
    fig = figures()
    cycles = max(min(fig.matmul_stationary_floor, per_partition(stationary_shape)), per_partition(moving_shape))
    ledger.cycles["tensor"] += cycles * (fig.matmul_fp32_factor if float32 else 1)
    ledger.counts[instruction] += 1


def charge_transpose(shape: tuple[int, ...]) -> None:
    """nc_transpose on the Tensor Engine: max(P, min(64, F)) cycles."""
    ledger = context.current().ledger
    partitions = shape[0] if shape else 1
    ledger.cycles["tensor"] += max(partitions, min(figures().matmul_stationary_floor, per_partition(shape)))
    ledger.counts["nc_transpose"] += 1


def charge_dma(nbytes: int, instruction: str) -> None:
    """A DMA transfer of `nbytes`."""
    ledger = context.current().ledger
    ledger.dma_bytes += int(nbytes)
    ledger.counts[instruction] += 1


# ---------------------------------------------------------------------------------------------------
# Estimates by op name, for the audit: the last launch of each kernel and of each nki_op


LAST: dict[str, EngineEstimate] = {}
_collecting: list[list[EngineEstimate]] = []


def note(name: str, estimate: EngineEstimate) -> None:
    """Record `estimate` as the latest of `name` and for every open `collecting()` block."""
    LAST[name] = estimate
    for sink in _collecting:
        sink.append(estimate)


@contextlib.contextmanager
def collecting() -> Iterator[list[EngineEstimate]]:
    """The estimates of the kernel launches made inside the block."""
    sink: list[EngineEstimate] = []
    _collecting.append(sink)
    try:
        yield sink
    finally:
        _collecting.remove(sink)


def combined(estimates: list[EngineEstimate]) -> EngineEstimate | None:
    """Launches one after another (an nki_op calling several kernels): busy times, bytes and the
    estimates add up."""
    if not estimates:
        return None
    engine_ns = {e: sum(x.engine_ns.get(e, 0.0) for x in estimates) for e in ENGINES}
    counts: Counter = Counter()
    for x in estimates:
        counts.update(x.instructions)
    return EngineEstimate(engine_ns, sum(x.dma_ns for x in estimates), sum(x.dma_bytes for x in estimates),
                          dict(counts), estimates[0].target, sum(x.total_ns for x in estimates),
                          rule=f"{RULE}, per kernel launch; launches one after another",
                          not_modelled=estimates[0].not_modelled)


def last_estimate(op: str) -> EngineEstimate | None:
    """The estimate of the latest launch of `op` ("nki::kernel" or an nki_op "mylib::op[.overload]")."""
    return LAST.get(op) or LAST.get(op.split(".", 1)[0])
