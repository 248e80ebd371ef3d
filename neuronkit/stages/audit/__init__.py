"""Stage 03, op audit: every ATen op the model runs, classified against Neuron support (native, CPU
fallback, first-release blocker), with the module that issued it and a remedy per finding."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AuditOptions:
    """The op audit's options (notebook 03's parameters)."""

    training: bool = True  # audit backward and one optimizer step too
    generate: bool = False  # audit greedy decoding too (causal LMs; needs values, so not weightless)
