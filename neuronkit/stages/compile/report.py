"""The report's numbers from the compile stage's record: graphs and breaks, the run's one forward time
(beside the profile's roofline estimate) and the compiled speed-up; and the ops compiled graphs fell back on."""

from __future__ import annotations

from typing import Any

from neuronkit.reporting.model import KeyNumber, RunRecords
from neuronkit.stages.compile.evidence import CompileEvidence
from neuronkit.units import format_duration, format_ms


def key_numbers(run: RunRecords) -> list[KeyNumber]:
    """torch.compile's graphs and graph breaks, then the timing numbers."""
    tiles = []
    compiled = run.evidence("compile")
    if compiled is not None and isinstance(compiled.graphs, int):
        breaks = len(compiled.graph_breaks or [])
        tiles.append(KeyNumber("torch.compile", f"{compiled.graphs} graph{'s' * (compiled.graphs != 1)}",
                               f"{breaks} graph break{'s' * (breaks != 1)}", compiled.graphs, "graphs"))
    return tiles + _timing_numbers(compiled, run.evidence("profile"), run.clock)


def fallbacks(record: CompileEvidence) -> list[tuple[str, str]]:
    """(op, "compile") for every op inside a compiled graph that fell back to the CPU."""
    return [(str(op), "compile") for op in record.fallback_ops]


def _timing_numbers(compiled: Any, profile: Any, clock: str) -> list[KeyNumber]:
    """The run's one forward time (the compile stage's eager forward, measured interleaved with the compiled
    one) beside the profile's roofline estimate for trn2 when there is one, and the compiled speed-up, which
    no estimate covers. On the simulated device both are host timings and say so."""
    if compiled is None or not isinstance(compiled.eager_step_ms, (int, float)):
        return []
    host = clock == "host"
    estimate = getattr(profile, "est_trn2_step_us", None)
    beside = (f"; trn2 estimate {format_duration(estimate / 1e6)} (roofline sum of the profiled ops from "
              "published peaks, no launch or host cost)" if isinstance(estimate, (int, float))
              else "; no Trainium estimate (the profile stage has none)")
    runs = f"median of {compiled.runs}" if compiled.runs else "median"
    tiles = [KeyNumber("Forward time" + (" (host)" if host else ""), format_ms(compiled.eager_step_ms),
                       f"eager forward on the device, {runs} (compile stage)"
                       + (", a host timing of the simulated device, not Trainium's" if host else "") + beside,
                       compiled.eager_step_ms, "ms", clock)]
    if isinstance(compiled.speedup, (int, float)):
        note = "eager over compiled forward" + (
            ": host timings of the simulated device; no Trainium estimate exists for compiled graphs, so this "
            "ratio says nothing of Trainium's" if host else " on Trainium")
        tiles.append(KeyNumber("Compiled speed-up" + (" (host)" if host else ""), f"{compiled.speedup:.2f}×", note,
                               compiled.speedup, "×", clock))
    return tiles
