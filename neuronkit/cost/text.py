"""Estimates in words and numbers a manager reads: throughput, MFU, hours and dollars, each labelled an
estimate with its band. Used by `neuronkit plan`, notebook 07 and the report."""

from __future__ import annotations

from neuronkit.cost.serving import ServingEstimate
from neuronkit.cost.training import TrainingEstimate
from neuronkit.units import format_bytes, format_duration


def usd(value: float | None) -> str:
    """`$1,234` / `$0.41` / `—` (no published price)."""
    if value is None:
        return "—"
    return f"${value:,.0f}" if value >= 100 else f"${value:,.2f}" if value >= 0.01 else f"${value:.2g}"


def count(value: float) -> str:
    """`1.6 T` / `392.9 k` / `47.9`."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:,.1f} {unit}"
    return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"


def hours(value: float) -> str:
    """`12 min` / `3.2 h` / `41 days` / `2.3 years`."""
    if value >= 24 * 365:
        return f"{value / 24 / 365:,.1f} years"
    if value >= 48:
        return f"{value / 24:,.0f} days"
    if value >= 1:
        return f"{value:,.1f} h"
    return format_duration(value * 3600)


def training(est: TrainingEstimate) -> list[str]:
    """The training estimate of one layout, a few lines."""
    step = est.step
    where = ", ".join(f"{name} {format_duration(value)}" for name, value in (
        ("compute", step.compute), ("HBM-bound extra", step.memory_bound),
        ("exposed communication", step.communication),
        ("collective latency", step.latency), ("pipeline bubble", step.pipeline_bubble),
        ("data-parallel all-reduce", step.data_parallel), ("optimizer", step.optimizer)) if value > 0)
    lines = [f"ESTIMATE, {est.checked_on}:",
             f"  {est.layout} on {est.nodes} × {est.instance}: {count(est.sequences_per_s)} sequences/s, "
             f"{count(est.tokens_per_s)} tokens/s, MFU {est.mfu:.1%}",
             f"  step {format_duration(est.step_seconds)} for {est.global_batch} sequences × {est.seq_len} tokens "
             f"({est.microbatches} micro-batch(es) of {est.micro_batch} per replica): {where}",
             f"  {usd(est.usd_per_hour)}/h, {usd(est.usd_per_million_tokens)} per million tokens "
             f"({est.pricing.source})",
             f"  {count(est.budget_tokens)} tokens: {hours(est.hours)}, {usd(est.usd)}"]
    if not est.fits:
        lines.append(f"  does NOT fit by this estimate: {format_bytes(est.memory.total)} on the fullest core of "
                     f"{format_bytes(est.hbm_per_core)}")
    return lines + [f"  note: {n}" for n in est.notes]


def serving(est: ServingEstimate) -> list[str]:
    """The serving estimate of one setup, a few lines."""
    copies = f", {est.replicas} copies" if est.replicas > 1 else ""
    lines = [f"ESTIMATE, {est.checked_on}:",
             f"  {est.model} on {est.instance}, tp={est.tp}{copies}, batch {est.batch}, {est.input_len} tokens in, "
             f"{est.output_len} out, {est.weights} weights:",
             f"  TTFT {format_duration(est.ttft_s)}, TPOT {format_duration(est.tpot_s)}, "
             f"{count(est.output_tokens_per_s)} output tokens/s, MFU {est.mfu:.1%}",
             f"  {usd(est.usd_per_hour)}/h, {usd(est.usd_per_million_tokens)} per million output tokens "
             f"({est.pricing.source})"]
    if not est.meets_target:
        targets = [f"{name} ≤ {format_duration(limit)}" for name, limit in (("TPOT", est.max_tpot_s),
                                                                              ("TTFT", est.max_ttft_s)) if limit]
        lines.append(f"  misses the latency target ({', '.join(targets)})")
    if not est.fits:
        lines.append(f"  does NOT fit: {format_bytes(est.memory.total)} per core of {format_bytes(est.hbm_per_core)}")
    return lines + [f"  note: {n}" for n in est.notes]


def ranking(found: list[TrainingEstimate] | list[ServingEstimate]) -> list[str]:
    """A sweep's candidates, cheapest first, one line each."""
    lines = []
    for rank, est in enumerate(found, start=1):
        if isinstance(est, TrainingEstimate):
            lines.append(f"{rank}. {est.nodes} × {est.instance}, {est.layout}: {usd(est.usd_per_million_tokens)}/M "
                         f"tokens, {count(est.tokens_per_s)} tokens/s, MFU {est.mfu:.1%}, {usd(est.usd_per_hour)}/h, "
                         f"{count(est.budget_tokens)} tokens in {hours(est.hours)} for {usd(est.usd)}")
        else:
            lines.append(f"{rank}. {est.instance}, tp={est.tp} × {est.replicas} copies, batch {est.batch}: "
                         f"{usd(est.usd_per_million_tokens)}/M output tokens, {count(est.output_tokens_per_s)} "
                         f"tokens/s, TPOT {format_duration(est.tpot_s)}, TTFT {format_duration(est.ttft_s)}, "
                         f"{usd(est.usd_per_hour)}/h")
    return lines
