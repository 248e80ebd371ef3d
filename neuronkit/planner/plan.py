"""Plan a parallel training layout before renting: does it fit each core, and what does it send?

`plan(MODEL, tp=4, fsdp=16)` answers for the rank that needs the most memory: parameters, gradients,
AdamW state, saved activations and communication buffers against one logical NeuronCore's HBM, and the
collectives of one training step by kind, with an ESTIMATE of their time from the instance's published
link bandwidths (ring algorithms, nothing overlapped, latency ignored). Layer figures are measured by
`neuronkit.planner.probe` with PyTorch's fake process group; this module scales them to the
model's depth, its pipeline stages and micro-batches. `sweep(MODEL)` proposes the smallest layouts
that fit.

Ranks are numbered with tensor parallel innermost, then FSDP, then data-parallel replicas, then
pipeline stages, as TorchTitan and the Neuron TP tutorials lay them out, so a tp group stays inside a
chip or an instance whenever it can.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import PretrainedConfig

from neuronkit import models
from neuronkit.planner.instances import Instance, instance as find_instance
from neuronkit.planner.probe import LayerProbe
from neuronkit.errors import NeuronkitInputError, require_positive_ints
from neuronkit.units import format_bytes
from neuronkit.json_text import json_text

# Bytes each rank sends per byte of payload, ring algorithms, by collective and group size.
RING_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
               "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
               "send_recv": lambda n: 1.0}
_DIMS = ("tp", "fsdp", "dp", "pp")  # innermost first
ADAMW_STATES = 2  # exp_avg and exp_avg_sq, each shaped and typed like its parameter (torch.optim.AdamW)


@dataclass(frozen=True, slots=True)
class Layout:
    """Degrees of tensor parallel, FSDP sharding, data-parallel replicas and pipeline stages."""

    tp: int = 1
    fsdp: int = 1
    dp: int = 1
    pp: int = 1

    @property
    def world(self) -> int:
        return self.tp * self.fsdp * self.dp * self.pp

    def __str__(self) -> str:
        parts = [f"{dim}={getattr(self, dim)}" for dim in _DIMS if getattr(self, dim) > 1]
        return " × ".join(parts) or "1 rank"


@dataclass(frozen=True, slots=True)
class RankMemory:
    """Bytes one rank holds at its peak, by kind."""

    stage: int
    parameters: int
    gradients: int
    optimizer: int
    activations: int
    buffers: int  # FSDP all-gather/reduce-scatter buffers, or DDP's gradient buckets

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer + self.activations + self.buffers


@dataclass(frozen=True, slots=True)
class Collective:
    """One kind of collective in a training step, for one rank."""

    kind: str  # all_reduce, all_gather, reduce_scatter, send_recv
    group: str  # tp, fsdp, dp, pp
    carries: str
    calls: int
    nbytes: int  # payload summed over the step's calls (the full tensor each call reduces or gathers)
    link: str  # NeuronLink, EFA, or same chip
    est_seconds: float  # ESTIMATE: ring algorithm at the link's published peak, no overlap, no latency


@dataclass
class Plan:
    """A layout's per-rank memory against the core's HBM, and its step's collectives."""

    model: str
    num_parameters: int
    instance: str
    nodes: int
    layout: Layout
    dtype: str
    micro_batch: int
    seq_len: int
    microbatches: int
    hbm_per_core: int
    memory: RankMemory
    collectives: list[Collective]
    notes: list[str] = field(default_factory=list)
    source: str = ""

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.hbm_per_core

    @property
    def headroom(self) -> int:
        """Bytes left on the fullest core (negative: short by that much)."""
        return self.hbm_per_core - self.memory.total

    @property
    def comm_seconds(self) -> float:
        return sum(c.est_seconds for c in self.collectives)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(layout={**asdict(self.layout), "world": self.layout.world},
                    fits=self.fits, headroom=self.headroom, comm_seconds_estimate=self.comm_seconds)
        data["memory"]["total"] = self.memory.total
        return data

    def to_json(self, path: str | Path | None = None) -> str:
        """The plan as JSON; also written to `path` when given."""
        return json_text(self.to_dict(), path)

    def verdict(self) -> str:
        word = "fits" if self.fits else "does NOT fit"
        how = f"{format_bytes(self.headroom)} to spare" if self.fits else f"short by {format_bytes(-self.headroom)}"
        return (f"{self.layout} on {self.nodes} × {self.instance} ({self.layout.world} ranks): {word} — "
                f"{format_bytes(self.memory.total)} of {format_bytes(self.hbm_per_core)} on the fullest core, {how}")

    def table(self) -> str:
        """A readable summary: the verdict, the fullest rank's memory, the step's collectives."""
        m = self.memory
        lines = [self.verdict(), "",
                 f"fullest rank (pipeline stage {m.stage}), {self.dtype}, micro-batch {self.micro_batch} × "
                 f"{self.seq_len} tokens, {self.microbatches} micro-batch(es) per step:"]
        for label, value in (("parameters", m.parameters), ("gradients", m.gradients),
                             ("AdamW state", m.optimizer), ("saved activations", m.activations),
                             ("comm buffers", m.buffers), ("total", m.total)):
            lines.append(f"  {label:<18} {format_bytes(value):>12}")
        if self.collectives:
            lines += ["", "collectives per training step (time is an ESTIMATE at published peak bandwidth):",
                      f"  {'kind':<15}{'group':<6}{'link':<11}{'calls':>6}{'bytes':>13}{'est. ms':>10}  carries"]
            for c in self.collectives:
                lines.append(f"  {c.kind:<15}{c.group:<6}{c.link:<11}{c.calls:>6}{format_bytes(c.nbytes):>13}"
                             f"{c.est_seconds * 1e3:>10.2f}  {c.carries}")
            lines.append(f"  total estimated communication: {self.comm_seconds * 1e3:.1f} ms per step")
        lines += [""] + [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html
        return f"<pre>{html.escape(self.table())}</pre>"


def plan(model: models.ModelSpec, *, instance: str = "trn2.48xlarge", nodes: int = 1,
         dtype: torch.dtype | str = torch.bfloat16, micro_batch: int = 1, seq_len: int = 2048,
         microbatches: int | None = None, **degrees: int | None) -> Plan:
    """The per-rank memory and step collectives of one layout on `nodes` instances.

    `degrees` are the layout's, by name (`Layout`): `tp`, `pp` and `dp` default to 1, `fsdp` to whatever
    fills the instances' cores after tp, pp and dp.
    """
    unknown = sorted(set(degrees) - {"tp", "fsdp", "pp", "dp"})
    if unknown:
        raise NeuronkitInputError(f"unknown parallel degree(s) {', '.join(unknown)}; choose from tp, fsdp, pp, dp")
    inst = find_instance(instance)
    layout = resolve_layout(inst, nodes, **degrees)
    return _Planner(model, models.compute_dtype(dtype), micro_batch, seq_len).plan(layout, inst, nodes, microbatches)


def resolve_layout(inst: Instance, nodes: int, *, tp: int = 1, fsdp: int | None = None, pp: int = 1,
                   dp: int = 1) -> Layout:
    """The layout of `nodes` × `inst`: `fsdp` defaults to whatever fills the cores after tp, pp and dp."""
    world = _positive("nodes", nodes) * inst.cores
    for name, value in (("tp", tp), ("pp", pp), ("dp", dp)):
        _positive(name, value)
    if fsdp is None:
        if world % (tp * pp * dp):
            raise NeuronkitInputError(f"tp×pp×dp = {tp * pp * dp} does not divide the {world} cores of "
                                      f"{nodes} × {inst.name}")
        fsdp = world // (tp * pp * dp)
    layout = Layout(tp=tp, fsdp=_positive("fsdp", fsdp), dp=dp, pp=pp)
    if layout.world != world:
        raise NeuronkitInputError(f"layout {layout} uses {layout.world} ranks, but {nodes} × {inst.name} has "
                                  f"{world} cores; set --nodes or the degrees so they match")
    return layout


def sweep(model: models.ModelSpec, *, instance: str = "trn2.48xlarge", dtype: torch.dtype | str = torch.bfloat16,
          micro_batch: int = 1, seq_len: int = 2048, max_nodes: int = 16, top: int = 5) -> list[Plan]:
    """The layouts that fit on the fewest instances (1, 2, 4, … up to `max_nodes`), fastest first.

    Tensor parallel stays inside an instance; every remaining rank shards with FSDP.
    """
    inst = find_instance(instance)
    planner = _Planner(model, models.compute_dtype(dtype), micro_batch, seq_len)
    nodes = 1
    while nodes <= max_nodes:
        world = nodes * inst.cores
        fitting = [p for p in (planner.try_plan(layout, inst, nodes) for layout in planner.layouts(world, inst))
                   if p is not None and p.fits]
        if fitting:
            return sorted(fitting, key=lambda p: (p.comm_seconds, p.layout.pp, p.layout.tp))[:top]
        nodes *= 2
    return []


def _positive(name: str, value: object) -> int:
    require_positive_ints(**{name: value})
    return value  # type: ignore[return-value]


class _Planner:
    """One model's probe, shared by every layout a sweep tries (measurements are cached per layout)."""

    def __init__(self, spec: models.ModelSpec, dtype: torch.dtype, micro_batch: int, seq_len: int) -> None:
        self.config = models.load_config(spec)
        self.name = str(spec) if not isinstance(spec, PretrainedConfig) else self.config.model_type
        self.dtype = dtype
        self.micro_batch = _positive("micro_batch", micro_batch)
        self.seq_len = _positive("seq_len", seq_len)
        if problem := models.too_long(models.max_positions(self.config), seq_len):
            raise NeuronkitInputError(problem)
        self.probe = LayerProbe(self.config, dtype)
        self.num_parameters = models.num_parameters(self.config)

    def layouts(self, world: int, inst: Instance) -> list[Layout]:
        found = []
        for tp in divisors(min(world, inst.cores)):
            if world % tp or not self._tp_ok(tp):
                continue
            for pp in divisors(world // tp):
                if pp <= self.probe.num_layers:
                    found.append(Layout(tp=tp, fsdp=world // (tp * pp), pp=pp))
        return found

    def try_plan(self, layout: Layout, inst: Instance, nodes: int) -> Plan | None:
        try:
            return self.plan(layout, inst, nodes, None)
        except NeuronkitInputError:
            return None

    def _tp_ok(self, tp: int) -> bool:
        try:
            self.probe.check_tp(tp)
        except NeuronkitInputError:
            return False
        return True

    def plan(self, layout: Layout, inst: Instance, nodes: int, microbatches: int | None) -> Plan:
        probe = self.probe
        probe.check_tp(layout.tp)
        if layout.pp > probe.num_layers:
            raise NeuronkitInputError(f"pp={layout.pp} exceeds the model's {probe.num_layers} layers")
        m = _positive("microbatches", microbatches) if microbatches is not None else layout.pp
        shards = probe.shards(layout.tp, layout.fsdp, layout.dp)
        traffic = probe.traffic(layout.tp, self.micro_batch, self.seq_len)
        layers = math.ceil(probe.num_layers / layout.pp)
        stages = {0, layout.pp - 1}
        memories = {s: self._memory(s, layout, shards, traffic, layers, m) for s in stages}
        worst = max(memories.values(), key=lambda mem: mem.total)
        collectives = self._collectives(worst, layout, shards, traffic, layers, m, inst)
        return Plan(model=self.name, num_parameters=self.num_parameters, instance=inst.name, nodes=nodes,
                    layout=layout, dtype=str(self.dtype).removeprefix("torch."), micro_batch=self.micro_batch,
                    seq_len=self.seq_len, microbatches=m, hbm_per_core=inst.hbm_bytes_per_core, memory=worst,
                    collectives=collectives, notes=self._notes(layout, shards), source=inst.source)

    def _memory(self, stage: int, layout: Layout, shards: Any, traffic: Any, layers: int, m: int) -> RankMemory:
        first, last = stage == 0, stage == layout.pp - 1
        params = layers * shards.layer + (shards.embedding if first else 0) + (shards.head if last else 0)
        in_flight = min(layout.pp - stage, m)  # 1F1B: stage s holds pp - s micro-batches' activations
        activations = layers * traffic.layer_saved * in_flight + (traffic.outside_saved if last else 0)
        return RankMemory(stage=stage, parameters=params, gradients=params, optimizer=ADAMW_STATES * params,
                          activations=activations, buffers=comm_buffers(layout, shards.layer_tp, params))

    def _collectives(self, rank: RankMemory, layout: Layout, shards: Any, traffic: Any, layers: int, m: int,
                     inst: Instance) -> list[Collective]:
        first, last = rank.stage == 0, rank.stage == layout.pp - 1
        found: list[Collective] = []

        def add(kind: str, group: str, carries: str, calls: int, nbytes: int) -> None:
            if calls and nbytes:
                link_name, per_rank = link(layout, group, inst)
                n = getattr(layout, group)
                found.append(Collective(kind, group, carries, calls, nbytes, link_name,
                                        RING_FACTOR[kind](n) * nbytes / per_rank))

        if layout.tp > 1:
            tp_calls: dict[tuple[str, str], list[int]] = {}
            for source, times in ((traffic.layer_collectives, layers * m),
                                  (traffic.outside_collectives, m if last else 0)):
                for key, (calls, nbytes) in source.items():
                    acc = tp_calls.setdefault(key, [0, 0])
                    acc[0] += calls * times
                    acc[1] += nbytes * times
            for (kind, phase), (calls, nbytes) in sorted(tp_calls.items()):
                add(kind, "tp", f"activations ({phase})", calls, nbytes)
        if layout.fsdp > 1:
            outside = (shards.embedding_tp if first else 0) + (shards.head_tp if last else 0)
            gathered = layers * shards.layer_tp + outside
            add("all_gather", "fsdp", "parameters (forward)", (layers + 1) * m, gathered * m)
            add("all_gather", "fsdp", "parameters (backward)", layers * m, layers * shards.layer_tp * m)
            add("reduce_scatter", "fsdp", "gradients", layers + 1, gathered)
        if layout.dp > 1:  # the rank's gradients, as many as its parameters
            add("all_reduce", "dp", "gradients", 1, rank.parameters)
        if layout.pp > 1:
            hidden = self.micro_batch * self.seq_len * self.config.hidden_size * self.dtype.itemsize
            add("send_recv", "pp", "activations and their gradients", 2 * m, 2 * m * hidden)
        return found

    def _notes(self, layout: Layout, shards: Any) -> list[str]:
        notes = ["per-rank bytes measured with PyTorch's fake process group: parallelize_module and fully_shard "
                 "on the meta device, one training forward+backward of 1- and 2-layer copies under FakeTensorMode",
                 f"parameters, gradients and AdamW state are all {str(self.dtype).removeprefix('torch.')} (no float32 "
                 "master copy; mixed precision that keeps one adds 4 bytes per parameter on its rank)",
                 "memory excludes the runtime's own reserve, compiled-graph scratch space and fragmentation: "
                 "keep headroom",
                 "communication times are estimates from published peak link bandwidth (ring algorithms, "
                 "no overlap with compute, no latency); measure on the instance before relying on them"]
        if layout.tp > 1 and shards.replicated_in_layer:
            notes.append(f"{format_bytes(shards.replicated_in_layer)} per layer (norms, biases, experts) are not "
                         "split by the tensor-parallel plan: every tp rank holds them whole")
        if layout.tp > 1 and self.probe.tied:
            notes.append("embeddings and LM head are tied: kept whole on every tp rank")
        if layout.pp > 1:
            notes.append(f"pipeline: {math.ceil(self.probe.num_layers / layout.pp)} layers per stage, 1F1B "
                         "schedule (stage s keeps pp - s micro-batches of activations), embeddings on the first "
                         "stage, loss and head on the last")
        return notes


def link(layout: Layout, group: str, inst: Instance) -> tuple[str, float]:
    """The slowest link a `group` of ranks crosses, and each rank's share of its bandwidth.

    Ranks on one chip exchange through its HBM; chips of an instance over NeuronLink; the instances of an
    UltraServer over its inter-instance NeuronLink; anything wider over EFA.
    """
    stride = math.prod(getattr(layout, d) for d in _DIMS[:_DIMS.index(group)])
    span = (getattr(layout, group) - 1) * stride
    if span >= inst.cores * inst.ultraserver_instances:
        return "EFA", inst.efa_bytes_per_s_per_core
    if span >= inst.cores:
        return "NeuronLink (UltraServer)", inst.neuronlink_inter_bytes_per_s_per_core
    if span >= inst.cores_per_chip:
        return "NeuronLink", inst.neuronlink_bytes_per_s_per_core
    return "same chip", inst.hbm_bytes_per_s_per_core


def comm_buffers(layout: Layout, layer: float, params: float) -> float:
    """A rank's communication buffers: with FSDP the layer being computed and the one prefetched, plus a
    gradient reduce buffer (`layer`: one layer after tensor parallel); with DDP its buckets, which copy the
    gradients (`params`; gradient_as_bucket_view=False by default)."""
    return 3 * layer if layout.fsdp > 1 else params if layout.dp > 1 else 0


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
