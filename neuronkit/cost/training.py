"""How long one training step takes on a parallel layout, and what a token budget costs: an ESTIMATE.

Per micro-batch, on one rank of the slowest pipeline stage (the last: its layers plus the LM head):

- compute: the model's forward + backward FLOPs (3 × forward: every layer matrix, attention's QKᵀ and AV
  over the causal half of the sequence, the head), split by tp, at the dtype's dense peak × the fitted
  achievable fraction;
- HBM: weights read three times (forward, the two backward matmuls) and the saved activations written
  and read back, at HBM bandwidth × the fitted fraction; the micro-batch takes the slower of the two;
- tensor parallel with sequence parallel (the Neuron recipes'): an all-gather before and a reduce-scatter
  after attention and the MLP, forward and backward, per layer;
- pipeline: a send and a receive per stage boundary; 1F1B runs m + pp - 1 slots;
- FSDP: each layer's parameters gathered forward and backward and its gradients reduce-scattered, every
  micro-batch;
- overlap: collective traffic runs beside compute (the chips' collective-communication cores), so a slot
  takes the slower of compute and traffic; every collective's fixed latency is on the critical path;
- data parallel: one gradient all-reduce per step, hidden behind the last micro-batch's backward when it can;
- the optimizer step: AdamW reads and writes parameters, gradients and two states at HBM bandwidth.

Traffic is ring algorithms over the slowest link a group crosses (`neuronkit.planner.plan.link`). Not
modelled: activation recomputation (its cost is inside the fitted compute fraction, fitted on a recipe
that recomputes selectively), host input pipelines, checkpoints.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from neuronkit.cost import memory
from neuronkit.cost.constants import Constants, frozen
from neuronkit.cost.pricing import Pricing
from neuronkit.cost.shape import ModelShape
from neuronkit.errors import NeuronkitInputError, require_positive_ints
from neuronkit.planner.instances import Instance
from neuronkit.planner.plan import RING_FACTOR, Layout, link

_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
CHINCHILLA_TOKENS_PER_PARAMETER = 20  # Hoffmann et al. 2022, compute-optimal training


@dataclass(frozen=True, slots=True)
class StepTime:
    """Where one training step's time goes, in seconds (estimates)."""

    compute: float  # every micro-batch's compute on the slowest stage
    memory_bound: float  # what the HBM roofline adds over compute
    communication: float  # collective traffic compute could not hide
    latency: float  # the fixed latency of every collective on the critical path
    pipeline_bubble: float  # 1F1B's pp - 1 idle slots
    data_parallel: float  # the gradient all-reduce the last backward could not hide
    optimizer: float

    @property
    def total(self) -> float:
        return (self.compute + self.memory_bound + self.communication + self.latency + self.pipeline_bubble
                + self.data_parallel + self.optimizer)


@dataclass(frozen=True)
class TrainingEstimate:
    """A training layout's step time, throughput and cost (an ESTIMATE with its band)."""

    model: str
    instance: str
    nodes: int
    layout: Layout
    dtype: str
    micro_batch: int
    seq_len: int
    global_batch: int  # sequences per optimizer step
    microbatches: int  # per data-parallel replica per step
    step: StepTime
    mfu: float
    memory: memory.RankBytes
    hbm_per_core: int
    pricing: Pricing
    band: float
    budget_tokens: float  # the training run's token budget (default: Chinchilla's 20 per parameter)
    checked_on: str
    notes: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.hbm_per_core

    @property
    def step_seconds(self) -> float:
        return self.step.total

    @property
    def sequences_per_s(self) -> float:
        return self.global_batch / self.step_seconds

    @property
    def tokens_per_s(self) -> float:
        return self.sequences_per_s * self.seq_len

    @property
    def usd_per_hour(self) -> float | None:
        return self.pricing.usd_per_hour(self.nodes)

    @property
    def usd_per_million_tokens(self) -> float | None:
        hourly = self.usd_per_hour
        return None if hourly is None else hourly / 3600 / self.tokens_per_s * 1e6

    @property
    def hours(self) -> float:
        """Hours to train on the token budget."""
        return self.budget_tokens / self.tokens_per_s / 3600

    @property
    def usd(self) -> float | None:
        """Dollars to train on the token budget."""
        hourly = self.usd_per_hour
        return None if hourly is None else self.hours * hourly

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "training", "model": self.model, "instance": self.instance, "nodes": self.nodes,
                "layout": {**asdict(self.layout), "world": self.layout.world}, "dtype": self.dtype,
                "micro_batch": self.micro_batch, "seq_len": self.seq_len, "global_batch": self.global_batch,
                "microbatches": self.microbatches, "fits": self.fits,
                "memory_estimate": {**asdict(self.memory), "total": self.memory.total,
                                    "hbm_per_core": self.hbm_per_core},
                "estimate": {"step_seconds": self.step_seconds, "step_breakdown_s": asdict(self.step),
                             "sequences_per_s": self.sequences_per_s, "tokens_per_s": self.tokens_per_s,
                             "mfu": self.mfu, **self.pricing.fields(self.usd_per_hour, self.usd_per_million_tokens),
                             "band": self.band,
                             "budget": {"tokens": self.budget_tokens, "hours": self.hours, "usd": self.usd},
                             "checked_on": self.checked_on},
                "notes": self.notes}


@dataclass(frozen=True)
class TrainingRun:
    """What a training run asks of the instances: `nodes` instances, `micro_batch` sequences of `seq_len`
    tokens per rank, `global_batch` sequences per optimizer step (default: one micro-batch per pipeline stage
    per data-parallel replica; rounded up to a whole number of micro-batches per replica), `dtype`, and
    `tokens`, the run's token budget (default: Chinchilla's 20 per parameter)."""

    nodes: int = 1
    micro_batch: int = 1
    seq_len: int = 2048
    global_batch: int | None = None
    dtype: str = "bfloat16"
    tokens: float | None = None


def estimate(shape: ModelShape, inst: Instance, layout: Layout, run: TrainingRun = TrainingRun(), *,
             pricing: Pricing | None = None, constants: Constants | None = None) -> TrainingEstimate:
    """The step time, throughput and cost of training `shape` on `run.nodes` × `inst` with `layout`."""
    nodes, micro_batch, seq_len, global_batch, dtype, tokens = (
        run.nodes, run.micro_batch, run.seq_len, run.global_batch, run.dtype, run.tokens)
    c = constants or frozen()
    if inst.serving_only:
        raise NeuronkitInputError(f"{inst.name} is an inference instance ({inst.chip_name}): training estimates "
                                  "cover Trainium instances; estimate serving on it with --serve")
    require_positive_ints(nodes=nodes, micro_batch=micro_batch, seq_len=seq_len, **(
        {"global_batch": global_batch} if global_batch is not None else {}))
    if layout.pp > shape.layers:
        raise NeuronkitInputError(f"pp={layout.pp} exceeds the model's {shape.layers} layers")
    if layout.world != nodes * inst.cores:
        raise NeuronkitInputError(f"layout {layout} uses {layout.world} ranks, but {nodes} × {inst.name} has "
                                  f"{nodes * inst.cores} cores")
    nbytes = _BYTES.get(dtype, 4)
    replicas = layout.fsdp * layout.dp
    per_step = replicas * micro_batch
    m = math.ceil((global_batch or per_step * layout.pp) / per_step)
    notes = []
    if global_batch and global_batch % per_step:
        notes.append(f"global batch {global_batch} rounded up to {m * per_step}: {m} micro-batches of "
                     f"{micro_batch} on each of {replicas} data-parallel replicas")
    peak = inst.peak_flops(dtype) * c.compute_fraction
    hbm = inst.hbm_bytes_per_s_per_core * c.hbm_fraction
    micro_tokens = micro_batch * seq_len
    layers = math.ceil(shape.layers / layout.pp)
    context = seq_len / 2 if shape.causal else seq_len
    # the last stage: its layers and the head (forward_flops counts every layer and the head: scale the layers)
    per_rank = shape.forward_flops(micro_tokens, context, tp=layout.tp)
    head = 2 * shape.hidden * shape.vocab / layout.tp * micro_tokens
    compute = 3 * ((per_rank - head) * layers / shape.layers + head) / peak
    last = layout.pp - 1
    weights = memory.stage_parameters(shape, Layout(tp=layout.tp, pp=layout.pp), last) * nbytes
    traffic = 3 * weights + 2 * layers * memory.activation_bytes(shape, micro_tokens, layout.tp, nbytes)
    micro = max(compute, traffic / hbm)

    def traffic_s(kind: str, group: str, nbytes_each: float) -> float:
        return RING_FACTOR[kind](getattr(layout, group)) * nbytes_each / link(layout, group, inst)[1]

    hidden_bytes = micro_tokens * shape.hidden * nbytes
    layer_bytes = memory.layer_parameters(shape, layout.tp) * nbytes
    sends = calls = 0.0
    if layout.tp > 1:  # sequence parallel: all-gather before, reduce-scatter after attention and the MLP, both ways
        sends += 8 * layers * traffic_s("all_gather", "tp", hidden_bytes)
        calls += 8 * layers
    if layout.pp > 1:  # the activation forward, its gradient back
        sends += 2 * traffic_s("send_recv", "pp", hidden_bytes)
        calls += 2
    if layout.fsdp > 1:  # each layer gathered forward and backward, its gradients reduce-scattered
        sends += layers * (2 * traffic_s("all_gather", "fsdp", layer_bytes)
                           + traffic_s("reduce_scatter", "fsdp", layer_bytes))
        calls += 3 * layers
    slot = max(micro, sends) + calls * c.collective_latency_s
    param_bytes = memory.stage_parameters(shape, layout, last) * nbytes  # and as many bytes of gradients
    data_parallel = 0.0
    if layout.dp > 1:
        data_parallel = max(0.0, traffic_s("all_reduce", "dp", param_bytes) - 2 / 3 * micro) + c.collective_latency_s
    optimizer = param_bytes * (2 + 2 * (1 + memory.ADAMW_STATES)) / hbm  # read p, g, states; write p, states
    step = StepTime(compute=m * compute, memory_bound=m * (micro - compute),
                    communication=m * (max(micro, sends) - micro), latency=m * calls * c.collective_latency_s,
                    pipeline_bubble=(layout.pp - 1) * slot, data_parallel=data_parallel, optimizer=optimizer)
    global_batch = m * per_step
    model_flops = 3 * shape.forward_flops(global_batch * seq_len, context)
    mfu = model_flops / (step.total * layout.world * inst.peak_flops(dtype))
    notes += c.range_notes(shape.parameters, shape.layer_experts > 0) + shape.beyond_positions(seq_len, "seq_len")
    rank = memory.training(shape, layout, micro_batch=micro_batch, seq_len=seq_len, microbatches=m, nbytes=nbytes)
    return TrainingEstimate(model=shape.name, instance=inst.name, nodes=nodes, layout=layout, dtype=dtype,
                            micro_batch=micro_batch, seq_len=seq_len, global_batch=global_batch, microbatches=m,
                            step=step, mfu=mfu, memory=rank, hbm_per_core=inst.hbm_bytes_per_core,
                            pricing=pricing or Pricing.of(inst), band=c.band_training,
                            budget_tokens=tokens or CHINCHILLA_TOKENS_PER_PARAMETER * shape.parameters,
                            checked_on=c.checked_on("training"), notes=notes)
