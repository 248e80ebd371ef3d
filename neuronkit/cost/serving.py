"""Serving a causal LM on one instance: time to first token, time per output token, output tokens/s and
dollars per million output tokens. An ESTIMATE, by the same physics as training:

- prefill (time to first token): the batch's prompts in one forward (every layer matrix, attention over the
  causal half of the prompt, the head for the last token), split by tp, at the dtype's peak × the fitted
  prefill compute fraction (a context-encoding graph, fitted on its own serving row: it runs below the
  training step's fraction); or, when slower, the rank's weights read once from HBM; plus two all-reduces per layer
  of the prompts' hidden states (their traffic runs beside compute, their latency does not);
- decode (time per output token): one token per sequence; the rank's weights and the batch's key/value
  cache (at the mean context, prompt + half the output) read from HBM at the fitted fraction, or the
  compute when slower; plus two all-reduces per layer;
- output tokens/s: batch × output length over (time to first token + output length × time per token),
  times the model copies the instance holds (cores / tp).

The weights may be stored narrower than they compute (`weight_bytes`, e.g. int8 weight storage); the
key/value cache is kept in the compute dtype.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neuronkit.cost import memory
from neuronkit.cost.constants import Constants, frozen
from neuronkit.cost.pricing import Pricing
from neuronkit.cost.shape import ModelShape
from neuronkit.errors import NeuronkitInputError, require_positive_ints
from neuronkit.planner.instances import Instance
from neuronkit.planner.plan import RING_FACTOR, Layout, divisors, link

WEIGHT_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "int8": 1, "float8": 1}


@dataclass(frozen=True)
class ServingEstimate:
    """Serving throughput, latency and cost on one instance (an ESTIMATE with its band)."""

    model: str
    instance: str
    tp: int
    replicas: int  # model copies on the instance (cores / tp)
    batch: int
    input_len: int
    output_len: int
    weights: str
    ttft_s: float
    tpot_s: float
    prefill: dict[str, float]  # seconds by part: compute, hbm, traffic (the slowest of the three counts), latency
    decode: dict[str, float]
    memory: memory.RankBytes
    hbm_per_core: int
    pricing: Pricing
    band: float
    band_ttft: float
    model_flops: float  # one batch's prefill and decode, the model's own FLOPs
    peak_flops: float  # the instance's dense peak, all cores
    checked_on: str
    max_tpot_s: float | None = None  # latency targets, when set
    max_ttft_s: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def meets_target(self) -> bool:
        return ((self.max_tpot_s is None or self.tpot_s <= self.max_tpot_s)
                and (self.max_ttft_s is None or self.ttft_s <= self.max_ttft_s))

    @property
    def mfu(self) -> float:
        """Model FLOPs per second over the instance's dense peak."""
        seconds = self.ttft_s + self.output_len * self.tpot_s
        return self.model_flops * self.replicas / seconds / self.peak_flops

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.hbm_per_core

    @property
    def output_tokens_per_s(self) -> float:
        per_copy = self.batch * self.output_len / (self.ttft_s + self.output_len * self.tpot_s)
        return per_copy * self.replicas

    @property
    def usd_per_hour(self) -> float | None:
        return self.pricing.usd_per_hour(1)

    @property
    def usd_per_million_tokens(self) -> float | None:
        hourly = self.usd_per_hour
        return None if hourly is None else hourly / 3600 / self.output_tokens_per_s * 1e6

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "serving", "model": self.model, "instance": self.instance, "tp": self.tp,
                "replicas": self.replicas, "batch": self.batch, "input_len": self.input_len,
                "output_len": self.output_len, "weights": self.weights, "fits": self.fits,
                "memory_estimate": {"weights": self.memory.parameters, "kv_cache": self.memory.buffers,
                                    "total": self.memory.total, "hbm_per_core": self.hbm_per_core},
                "estimate": {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "prefill_s": self.prefill,
                             "decode_s": self.decode, "output_tokens_per_s": self.output_tokens_per_s,
                             "tokens_per_s": self.output_tokens_per_s, "mfu": self.mfu,
                             **self.pricing.fields(self.usd_per_hour, self.usd_per_million_tokens),
                             "band": self.band, "band_ttft": self.band_ttft, "max_tpot_s": self.max_tpot_s,
                             "max_ttft_s": self.max_ttft_s,
                             "meets_target": self.meets_target, "checked_on": self.checked_on},
                "notes": self.notes}


@dataclass(frozen=True)
class ServingRun:
    """What serving asks of an instance: tensor parallel `tp` (default: every core of the instance, at most one
    per attention head), `batch` requests of `input_len` tokens in and `output_len` out, the `weights`' and the
    activations' `dtype`, and the latency targets (seconds per output token, seconds to the first)."""

    tp: int | None = None
    batch: int = 1
    input_len: int = 128
    output_len: int = 128
    weights: str = "bfloat16"
    dtype: str = "bfloat16"
    max_tpot_s: float | None = None
    max_ttft_s: float | None = None


def estimate(shape: ModelShape, inst: Instance, run: ServingRun = ServingRun(), *, pricing: Pricing | None = None,
             constants: Constants | None = None) -> ServingEstimate:
    """Serving `shape` on `inst` as `run` asks."""
    tp, batch, input_len, output_len, weights, dtype, max_tpot_s, max_ttft_s = (
        run.tp, run.batch, run.input_len, run.output_len, run.weights, run.dtype, run.max_tpot_s, run.max_ttft_s)
    c = constants or frozen()
    if not shape.causal:
        raise NeuronkitInputError(f"cannot estimate serving {shape.name}: serving estimates are for causal "
                                  "language models (a prefill, then one decode step per output token)")
    # default: every core (as AWS's serving rows run), but no more ranks than the model has attention heads
    tp = tp or max(d for d in divisors(inst.cores) if d <= max(shape.heads, 1))
    require_positive_ints(tp=tp, batch=batch, input_len=input_len, output_len=output_len)
    if inst.cores % tp:
        raise NeuronkitInputError(f"tp={tp} does not divide the {inst.cores} cores of {inst.name}")
    if tp > max(shape.heads, 1):
        raise NeuronkitInputError(f"tp={tp} exceeds {shape.name}'s {shape.heads} attention heads: a rank would hold "
                                  "no head of its own")
    if weights not in WEIGHT_BYTES:
        raise NeuronkitInputError(f"weights {weights!r}: one of {', '.join(WEIGHT_BYTES)}")
    hbm = inst.hbm_bytes_per_s_per_core * c.hbm_fraction
    kv_bytes = WEIGHT_BYTES.get(dtype, 2)
    weight_bytes = memory.stage_parameters(shape, Layout(tp=tp), 0) * WEIGHT_BYTES[weights]

    def step(flops: float, hbm_bytes: float, tokens: int, fraction: float) -> dict[str, float]:
        """The parts of one forward: compute (at `fraction` of the dtype's peak), HBM and all-reduce traffic
        (the slowest of the three counts), and every all-reduce's latency."""
        sends = calls = 0.0
        if tp > 1:  # two all-reduces per layer (after attention, after the MLP)
            bandwidth = link(Layout(tp=tp), "tp", inst)[1]
            sends = 2 * shape.layers * RING_FACTOR["all_reduce"](tp) * tokens * shape.hidden * kv_bytes / bandwidth
            calls = 2 * shape.layers
        return {"compute": flops / (inst.peak_flops(dtype) * fraction), "hbm": hbm_bytes / hbm, "traffic": sends,
                "latency": calls * c.collective_latency_s}

    prompt = batch * input_len
    cache_write = prompt * shape.kv_bytes_per_token(kv_bytes, tp)
    prefill = step(shape.forward_flops(prompt, input_len / 2, logits=batch, tp=tp), weight_bytes + cache_write, prompt,
                   c.prefill_compute_fraction)
    context = input_len + output_len  # a compiled graph's cache has its full length, and attention reads it all
    cache_read = batch * context * shape.kv_bytes_per_token(kv_bytes, tp)
    decode = step(shape.forward_flops(batch, context, tp=tp), weight_bytes + cache_read, batch, c.compute_fraction)
    rank = memory.serving(shape, tp=tp, batch=batch, context=input_len + output_len,
                          weight_bytes=WEIGHT_BYTES[weights], kv_bytes=kv_bytes)
    return ServingEstimate(model=shape.name, instance=inst.name, tp=tp, replicas=inst.cores // tp, batch=batch,
                           input_len=input_len, output_len=output_len, weights=weights, ttft_s=_seconds(prefill),
                           tpot_s=_seconds(decode), prefill=prefill, decode=decode,
                           memory=rank, hbm_per_core=inst.hbm_bytes_per_core, pricing=pricing or Pricing.of(inst),
                           band=c.band_serving, band_ttft=c.band_ttft,
                           model_flops=(shape.forward_flops(prompt, input_len / 2, logits=batch)
                                        + output_len * shape.forward_flops(batch, input_len + output_len / 2)),
                           peak_flops=inst.peak_flops(dtype) * inst.cores, checked_on=c.checked_on("serving"),
                           max_tpot_s=max_tpot_s, max_ttft_s=max_ttft_s,
                           notes=c.range_notes(shape.parameters, shape.layer_experts > 0) + shape.beyond_positions(
                               input_len + output_len, "input_len + output_len"))


def _seconds(parts: dict[str, float]) -> float:
    return max(parts["compute"], parts["hbm"], parts["traffic"]) + parts["latency"]


def describe(parts: dict[str, float]) -> str:
    """`8.20 ms = HBM 2.47 ms + 64 all-reduce latencies 5.73 ms`: which parts make a step's time."""
    bound = max(("compute", "hbm", "traffic"), key=lambda k: parts[k])
    names = {"compute": "compute", "hbm": "HBM reads", "traffic": "all-reduce traffic"}
    text = f"{_seconds(parts) * 1e3:.2f} ms = {names[bound]} {parts[bound] * 1e3:.2f} ms"
    return text + (f" + all-reduce latency {parts['latency'] * 1e3:.2f} ms" if parts["latency"] else "")
