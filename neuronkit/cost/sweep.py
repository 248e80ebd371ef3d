"""Which instance and layout to rent: every catalogue instance, instance count and layout that fits, ranked
by dollars per million tokens (ESTIMATES; instances without a published price come after, by throughput).

Training: tensor parallel inside an instance (dividing the attention heads), pipeline stages up to the
layer count, and the remaining ranks as FSDP shards or data-parallel replicas, on 1, 2, 4, ... instances;
a layout must give every data-parallel replica at least one micro-batch of the global batch. Ties go to
fewer cores, so a small model is proposed the smallest instance it fits, down to a single trn1.2xlarge.

Serving: every instance (Inferentia2 too), tensor parallel over the cores it needs, and batches of 1, 2,
4, ... that fit, meeting the latency targets (time per output token, and time to first token).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from neuronkit.cost import memory, serving, training
from neuronkit.cost.pricing import Pricing
from neuronkit.cost.shape import ModelShape
from neuronkit.errors import NeuronkitInputError
from neuronkit.planner.instances import Instance, instances
from neuronkit.planner.plan import Layout, divisors


@dataclass(frozen=True, slots=True)
class Choice:
    """The options a sweep ranks over: which instances, how many, and at which price."""

    instances: tuple[str, ...] = ()  # empty: every instance in the catalogue
    max_nodes: int = 1024
    price: str = "on_demand"
    usd_per_hour: float | None = None  # the team's own rate, for every instance
    max_hours: float | None = None  # training: a deadline for the token budget (more instances until met)

    def candidates(self, serving_only_too: bool) -> list[Instance]:
        known = instances()
        chosen = [known[n] for n in self.instances or tuple(known) if serving_only_too or not known[n].serving_only]
        if self.instances and not chosen:
            raise NeuronkitInputError(f"{', '.join(self.instances)}: inference instances (Inferentia2); training "
                                      "estimates cover Trainium instances")
        return chosen

    def pricing(self, inst: Instance) -> Pricing:
        return Pricing.of(inst, self.price, self.usd_per_hour)


def _rank(estimate: training.TrainingEstimate | serving.ServingEstimate) -> tuple:
    """Cheapest per token first (unpriced after, fastest first); ties to the fewest cores rented."""
    usd = estimate.usd_per_million_tokens
    if isinstance(estimate, training.TrainingEstimate):
        rate, cores = estimate.tokens_per_s, estimate.layout.world
    else:
        rate, cores = estimate.output_tokens_per_s, estimate.tp * estimate.replicas
    return (usd is None, round(usd, 6) if usd is not None else -rate, cores)


def train(shape: ModelShape, *, global_batch: int, micro_batch: int = 1, seq_len: int = 2048,
          dtype: str = "bfloat16", tokens: float | None = None,
          choice: Choice = Choice()) -> list[training.TrainingEstimate]:
    """Every training layout that fits (and meets the deadline, if any), best first."""
    found = [est for inst in choice.candidates(serving_only_too=False)
             for est in _fitting(shape, inst, global_batch, micro_batch, seq_len, dtype, tokens, choice)]
    return sorted(found, key=_rank)


def _fitting(shape: ModelShape, inst: Instance, global_batch: int, micro_batch: int, seq_len: int, dtype: str,
             tokens: float | None, choice: Choice) -> Iterator[training.TrainingEstimate]:
    """Every layout on 1, 2, 4, ... instances of `inst` that fits (and meets the deadline), stopping at the
    first instance count where one does: more instances of the same kind only add communication."""
    pricing = choice.pricing(inst)
    nodes = 1
    while nodes <= choice.max_nodes and (nodes == 1 or inst.efa_bytes_per_s_per_core > 0):
        fits = [est for layout in _layouts(shape, inst, nodes, global_batch, micro_batch)
                if (est := training.estimate(shape, inst, layout, training.TrainingRun(
                    nodes, micro_batch, seq_len, global_batch, dtype, tokens), pricing=pricing)).fits
                and (choice.max_hours is None or est.hours <= choice.max_hours)]
        if fits:
            yield from fits
            return
        nodes *= 2


def _layouts(shape: ModelShape, inst: Instance, nodes: int, global_batch: int, micro_batch: int) -> Iterator[Layout]:
    world = nodes * inst.cores
    for tp in divisors(inst.cores):
        if not memory.tp_ok(shape, tp):
            continue
        for pp in divisors(world // tp):
            if pp > shape.layers:
                continue
            rest = world // (tp * pp)
            if rest * micro_batch > global_batch:  # a replica would have no micro-batch of its own
                continue
            yield Layout(tp=tp, fsdp=rest, pp=pp)
            if rest > 1:
                yield Layout(tp=tp, dp=rest, pp=pp)


def serve(shape: ModelShape, *, input_len: int, output_len: int, weights: str = "bfloat16", dtype: str = "bfloat16",
          max_batch: int = 64, max_tpot_s: float | None = 0.05, max_ttft_s: float | None = 2.0,
          choice: Choice = Choice()) -> list[serving.ServingEstimate]:
    """Every serving setup that fits and meets the latency targets, best first."""
    found = []
    for inst in choice.candidates(serving_only_too=True):
        pricing = choice.pricing(inst)
        for tp in divisors(inst.cores):
            if not memory.tp_ok(shape, tp):
                continue
            batch = 1
            while batch <= max_batch:
                est = serving.estimate(shape, inst, serving.ServingRun(
                    tp, batch, input_len, output_len, weights, dtype, max_tpot_s, max_ttft_s), pricing=pricing)
                if not est.fits or not est.meets_target:
                    break
                found.append(est)
                batch *= 2
    return sorted(found, key=_rank)


def shortlist(found: list, top: int = 5) -> list:
    """The `top` best, then the best on each instance type with no published price (ranked by throughput
    only), so an unpriced instance is still shown."""
    best = found[:top]
    unpriced: dict[str, object] = {}
    for est in found[top:]:
        if est.usd_per_million_tokens is None and est.instance not in unpriced:
            unpriced[est.instance] = est
    return best + [e for name, e in unpriced.items() if not any(b.instance == name for b in best)]
