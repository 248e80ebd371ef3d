"""Per-rank memory of a training layout or a serving setup, from the model's parameter counts: fast enough
to try every layout of every instance in a sweep. An ESTIMATE: `neuronkit plan` for one layout measures a
training layout's bytes with PyTorch's own parallel APIs instead (`neuronkit.planner.probe`).

Conventions (the Neuron training and serving recipes'): tensor parallel splits every q/k/v/o and
gate/up/down matrix, the embeddings and the head (vocab-parallel), and replicates key/value heads when tp
exceeds their count; sequence parallel splits the saved activations by tp too; attention is fused (flash),
so no seq × seq scores are kept. Parameters, gradients and AdamW's two states are all in the training
dtype (as `neuronkit.planner.plan` assumes); FSDP shards all four over its group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from neuronkit.cost.shape import ModelShape
from neuronkit.planner.plan import ADAMW_STATES, Layout, comm_buffers


@dataclass(frozen=True, slots=True)
class RankBytes:
    """Bytes one rank holds at its peak, by kind (an estimate)."""

    parameters: int
    gradients: int
    optimizer: int
    activations: int
    buffers: int  # FSDP's gathered layers, DDP's gradient buckets; or, serving, the key/value cache

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer + self.activations + self.buffers


def tp_ok(shape: ModelShape, tp: int) -> bool:
    """Whether a sweep may propose tensor parallel `tp`: a plan splits the model's layers, and tp divides
    the query heads and divides the key/value heads or is a multiple of them (heads replicated, as NxD's
    kv_size_multiplier does), so no head is padded."""
    if tp == 1:
        return True
    kv = shape.kv_heads
    return shape.splittable and shape.heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)


def layer_parameters(shape: ModelShape, tp: int) -> float:
    """One layer's parameters on one of `tp` ranks (before FSDP)."""
    return shape.rank_layer(tp)


def stage_parameters(shape: ModelShape, layout: Layout, stage: int) -> float:
    """Parameters one rank of pipeline stage `stage` holds after tensor parallel and FSDP."""
    layers = math.ceil(shape.layers / layout.pp)
    first, last = stage == 0, stage == layout.pp - 1
    outside = (shape.embedding / layout.tp if first else 0) + ((shape.head / layout.tp + shape.other) if last else 0)
    return (layers * layer_parameters(shape, layout.tp) + outside) / layout.fsdp


def activation_bytes(shape: ModelShape, tokens: int, tp: int, nbytes: int) -> float:
    """Bytes one layer saves for backward over `tokens` tokens on one of `tp` ranks: the inputs and
    outputs of its matrices (what a fused-attention layer keeps), split by sequence parallel."""
    return tokens * shape.layer_io * nbytes / tp


def training(shape: ModelShape, layout: Layout, *, micro_batch: int, seq_len: int, microbatches: int,
             nbytes: int) -> RankBytes:
    """The fullest rank's bytes: the first pipeline stage (most micro-batches in flight) or the last
    (the head and the logits), whichever holds more."""
    tokens = micro_batch * seq_len
    layers = math.ceil(shape.layers / layout.pp)
    found = []
    for stage in {0, layout.pp - 1}:
        params = math.ceil(stage_parameters(shape, layout, stage)) * nbytes
        in_flight = min(layout.pp - stage, microbatches)  # 1F1B: stage s keeps pp - s micro-batches
        saved = layers * activation_bytes(shape, tokens, layout.tp, nbytes) * in_flight
        if stage == layout.pp - 1:  # logits in the training dtype and their float32 loss copy
            saved += tokens * shape.vocab * (nbytes + 4) / layout.tp
        buffers = comm_buffers(layout, layer_parameters(shape, layout.tp) * nbytes, params)
        found.append(RankBytes(parameters=params, gradients=params, optimizer=ADAMW_STATES * params,
                               activations=int(saved), buffers=int(buffers)))
    return max(found, key=lambda rank: rank.total)


def serving(shape: ModelShape, *, tp: int, batch: int, context: int, weight_bytes: int, kv_bytes: int) -> RankBytes:
    """One rank's bytes when serving: its share of the weights, and the key/value cache of `batch`
    sequences of `context` tokens (activations of one step are small beside them and left out)."""
    weights = math.ceil(stage_parameters(shape, Layout(tp=tp), 0)) * weight_bytes
    cache = batch * context * shape.kv_bytes_per_token(kv_bytes, tp)
    return RankBytes(parameters=weights, gradients=0, optimizer=0, activations=0, buffers=int(cache))
