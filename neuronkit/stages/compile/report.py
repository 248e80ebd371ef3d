"""The report's numbers from the compile stage's record: graphs and breaks, on Trainium the run's one forward
time and the compiled speed-up; and the ops compiled graphs fell back on."""

from __future__ import annotations

from typing import Any

from neuronkit.reporting.model import KeyNumber, RunRecords
from neuronkit.stages.compile.evidence import CompileEvidence
from neuronkit.units import format_ms


def key_numbers(run: RunRecords) -> list[KeyNumber]:
    """torch.compile's graphs and graph breaks, then the timing numbers."""
    tiles = []
    compiled = run.evidence("compile")
    if compiled is not None and isinstance(compiled.graphs, int):
        breaks = len(compiled.graph_breaks or [])
        tiles.append(KeyNumber("torch.compile", f"{compiled.graphs} graph{'s' * (compiled.graphs != 1)}",
                               f"{breaks} graph break{'s' * (breaks != 1)}", compiled.graphs, "graphs"))
    return tiles + _timing_numbers(compiled, run.clock)


def fallbacks(record: CompileEvidence) -> list[tuple[str, str]]:
    """(op, "compile") for every op inside a compiled graph that fell back to the CPU."""
    return [(str(op), "compile") for op in record.fallback_ops]


def _timing_numbers(compiled: Any, clock: str) -> list[KeyNumber]:
    """On Trainium, the run's one forward time (the compile stage's eager forward, measured interleaved with
    the compiled one) and the compiled speed-up. On the simulated device both are host timings that say
    nothing of Trainium's: they stay in the compile stage's card, labelled host, and leave the headline."""
    if clock != "trainium" or compiled is None or not isinstance(compiled.eager_step_ms, (int, float)):
        return []
    runs = f"median of {compiled.runs}" if compiled.runs else "median"
    tiles = [KeyNumber("Forward time", format_ms(compiled.eager_step_ms),
                       f"eager forward on Trainium, {runs} (compile stage)", compiled.eager_step_ms, "ms", clock)]
    if isinstance(compiled.speedup, (int, float)):
        tiles.append(KeyNumber("Compiled speed-up", f"{compiled.speedup:.2f}×", "eager over compiled forward on "
                               "Trainium", compiled.speedup, "×", clock))
    return tiles
