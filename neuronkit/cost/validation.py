"""The cost model held to AWS's published numbers: every training and serving row of the Neuron SDK
documentation's performance CSVs the model can express (`neuronkit/data/aws_published_rows.toml`),
predicted and compared. Ratios are predicted / published for rates (sequences/s, output tokens/s) and for
times (TTFT, TPOT): 1.0 is exact, above 1 the estimate is too fast for rates and too slow for times.

`fit()` sets the four physical constants from the two fitting rows; `band()` is the spread of the ratios on
every other row the model is held to. `bench/bench_cost.py` prints the table.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Any, Iterable

from transformers import PretrainedConfig
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from neuronkit.cost import serving, training
from neuronkit.cost.constants import Constants
from neuronkit.cost.shape import ModelShape, model_shape
from neuronkit.planner.instances import instance
from neuronkit.planner.plan import Layout
from neuronkit.resources import data_toml


@dataclass(frozen=True, slots=True)
class Check:
    """One published row against the model's prediction."""

    kind: str  # training or serving
    metric: str  # sequences_per_s, output_tokens_per_s, tpot_ms, ttft_ms
    row: str  # what the row is, in a few words
    where: str  # file:line in the docs repository
    published: float
    predicted: float
    fit: bool  # a row the constants were fitted on
    outside: str  # why the row is not held to the band ("" when it is)
    detail: str = ""  # where the model's figure comes from

    @property
    def ratio(self) -> float:
        return self.predicted / self.published


@functools.lru_cache(maxsize=1)
def published() -> dict[str, Any]:
    """The published rows and the configs of the models they name."""
    return data_toml("aws_published_rows.toml")


@functools.lru_cache(maxsize=None)
def _shape(name: str) -> ModelShape:
    spec = published()["models"][name]["config"]
    config: PretrainedConfig = CONFIG_MAPPING[spec["model_type"]].from_dict(dict(spec))
    return replace(model_shape(config), name=name)


def parameter_range() -> tuple[int, int]:
    """The parameter counts of the smallest and the largest model the published rows name."""
    sizes = [_shape(name).parameters for name in published()["models"]]
    return min(sizes), max(sizes)


def checks(constants: Constants) -> list[Check]:
    """Every published row the model expresses, predicted with `constants`."""
    found: list[Check] = []
    for r in published()["training"]:
        est = _trained(r, constants)
        step = est.step
        detail = (f"step {est.step_seconds:.2f} s: compute {step.compute:.2f} s, collective latency "
                  f"{step.latency:.2f} s, pipeline bubble {step.pipeline_bubble:.2f} s; MFU {est.mfu:.1%}")
        found.append(Check("training", "sequences_per_s", r["row"], f"{r['file']}:{r['line']}",
                           r["published_sequences_per_s"], est.sequences_per_s, r["fit"], r.get("outside", ""), detail))
    for r in published()["serving"]:
        est = serving.estimate(_shape(r["model"]), instance(r["instance"]), _serving_run(r), constants=constants)
        what = (f"{r['model']} on {r['instance']}, tp={r['tp']}, batch {r['batch']}, {r['input_len']} in / "
                f"{r['output_len']} out, {r['weights']} weights")
        where = f"{r['file']}:{r['line']}"
        decode, prefill = serving.describe(est.decode), serving.describe(est.prefill)
        for metric, value, pred, detail in (
                ("output_tokens_per_s", r["published_output_tokens_per_s"], est.output_tokens_per_s,
                 f"TTFT {prefill}; TPOT {decode}"),
                ("tpot_ms", r["published_tpot_ms"], est.tpot_s * 1e3, f"TPOT {decode}"),
                ("ttft_ms", r["published_ttft_ms"], est.ttft_s * 1e3, f"TTFT {prefill}")):
            outside = r.get("outside", "") or (_disagrees(r) if metric == "output_tokens_per_s" else "")
            found.append(Check("serving", metric, what, where, value, pred, r["fit"], outside, detail))
    return found


def _disagrees(row: dict[str, Any]) -> str:
    """Why a row's output tokens/s is not held to the band: when it disagrees by more than 25 % with what
    its own TTFT and TPOT give (batch × output / (TTFT + output × TPOT)), no model can match both."""
    implied = row["batch"] * row["output_len"] / (row["published_ttft_ms"] / 1e3
                                                 + row["output_len"] * row["published_tpot_ms"] / 1e3)
    ratio = row["published_output_tokens_per_s"] / implied
    if 0.8 <= ratio <= 1.25:
        return ""
    return (f"the row disagrees with itself: its TTFT and TPOT give {implied:,.1f} output tokens/s, "
            f"it publishes {row['published_output_tokens_per_s']:,.1f} ({ratio:.2f}×)")


def fit(retrieved: str) -> Constants:
    """The four physical constants from the fitting rows, bands unset: the compute fraction from the
    training row (its step is compute-bound), then the HBM fraction from the difference between the
    batch-8 and batch-1 serving rows' time per output token (the batch-8 step reads seven more sequences'
    key/value cache, nothing else) and the collective latency from the batch-1 row's (its step is the
    weights, one cache and 64 all-reduces). Each depends a little on the others: alternated until settled.
    Last, the prefill compute fraction from the batch-1 row's time to first token (4,096 tokens: its
    prefill is compute-bound)."""
    rows = published()
    train_row = next(r for r in rows["training"] if r["fit"])
    one, eight = sorted((r for r in rows["serving"] if r["fit"]), key=lambda r: r["batch"])
    fitted_on = tuple(f"{r['file']}:{r['line']}" for r in (train_row, one, eight))

    def constants(compute: float, hbm: float, latency: float, prefill: float = 0.25) -> Constants:
        return Constants(compute, hbm, latency, prefill, 0.0, 0.0, 0.0, fitted_on, 0, 0, retrieved)

    def tpot(c: Constants, r: dict[str, Any]) -> float:
        return serving.estimate(_shape(r["model"]), instance(r["instance"]), _serving_run(r), constants=c).tpot_s * 1e3

    def ttft(c: Constants, r: dict[str, Any]) -> float:
        return serving.estimate(_shape(r["model"]), instance(r["instance"]), _serving_run(r), constants=c).ttft_s * 1e3

    def rate(c: Constants) -> float:
        return _trained(train_row, c).sequences_per_s

    compute, hbm, latency = 0.25, 1.0, 1e-4
    for _ in range(6):
        hbm = _solve(lambda x: tpot(constants(compute, x, latency), eight) - tpot(constants(compute, x, latency), one),
                     eight["published_tpot_ms"] - one["published_tpot_ms"], 0.05, 1.0, rising=False)
        latency = _solve(lambda x: tpot(constants(compute, hbm, x), one), one["published_tpot_ms"], 0.0, 1e-3,
                         rising=True)
        compute = _solve(lambda x: rate(constants(x, hbm, latency)), train_row["published_sequences_per_s"], 0.01, 1.0,
                         rising=True)
    compute, hbm, latency = round(compute, 4), round(hbm, 4), float(f"{latency:.3g}")
    prefill = _solve(lambda x: ttft(constants(compute, hbm, latency, x), one), one["published_ttft_ms"], 0.01, 1.0,
                     rising=False)
    return constants(compute, hbm, latency, round(prefill, 4))


def _solve(f, target: float, lo: float, hi: float, *, rising: bool) -> float:
    """x in [lo, hi] where the monotonic f(x) meets target, by bisection."""
    for _ in range(60):
        mid = (lo + hi) / 2
        if (f(mid) < target) == rising:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def spread(ratios: Iterable[float], share: float = 0.9) -> float:
    """The ± fraction that holds `share` of the ratios (9 in 10), rounded up to 0.01."""
    errors = sorted(abs(r - 1) for r in ratios)
    if not errors:
        return 0.0
    worst = errors[math.ceil(share * len(errors)) - 1]
    return math.ceil(worst * 100 - 1e-9) / 100


def bands(found: list[Check]) -> dict[str, float]:
    """The band of each kind over the rows held to it (fitting rows and rows marked outside excluded)."""
    held = [c for c in found if not c.fit and not c.outside]
    return {"training": spread(c.ratio for c in held if c.kind == "training"),
            "serving": spread(c.ratio for c in held if c.metric in ("output_tokens_per_s", "tpot_ms")),
            "ttft": spread(c.ratio for c in held if c.metric == "ttft_ms")}


def misses(found: list[Check], band: dict[str, float]) -> list[Check]:
    """The held rows whose ratio falls outside their band."""
    def limit(c: Check) -> float:
        return band["training"] if c.kind == "training" else band["ttft"] if c.metric == "ttft_ms" else band["serving"]
    return [c for c in found if not c.fit and not c.outside and abs(c.ratio - 1) > limit(c) + 1e-9]


def _trained(r: dict[str, Any], constants: Constants) -> training.TrainingEstimate:
    """A published training row's run and layout, estimated with `constants`."""
    run = training.TrainingRun(nodes=r["nodes"], micro_batch=r["micro_batch"], seq_len=r["seq_len"],
                               global_batch=r["global_batch"], dtype=r["dtype"])
    return training.estimate(_shape(r["model"]), instance(r["instance"]), Layout(tp=r["tp"], dp=r["dp"], pp=r["pp"]),
                             run, constants=constants)


def _serving_run(r: dict[str, Any]) -> serving.ServingRun:
    """A published serving row's setup."""
    return serving.ServingRun(tp=r["tp"], batch=r["batch"], input_len=r["input_len"], output_len=r["output_len"],
                              weights=r["weights"])
