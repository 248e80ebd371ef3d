"""`neuronkit run MODEL --script train.py`'s record (script.json): the user's training script, scanned,
rewritten and run."""

from __future__ import annotations

from dataclasses import dataclass

from neuronkit.evidence import fact


@dataclass
class ScriptFinding:
    """One CUDA-specific use in the user's training script (`neuronkit port`)."""

    path: str = fact("File", default="")
    line: int = fact("Line", default=0)
    col: int = fact("Column", default=0)
    category: str = fact("Category", doc="rewrite (mechanical), decide (needs a person) or blocker", default="")
    rule: str = fact("Rule", doc="the row of neuronkit/data/cuda_port_rules.toml", default="")
    code: str = fact("Code", default="")
    remedy: str = fact("TorchNeuron remedy", default="")
    source: str = fact("Source of the remedy", doc="the article, the Neuron docs or S path:line", default="")
    accelerator: str | None = fact("Device-agnostic form", doc="torch.accelerator, where PyTorch has one")
    fixed_by_write: bool = fact("Fixed by the rewrite", default=False)


@dataclass
class ScriptFallback:
    """An op that fell back to the CPU while the rewritten script ran, and the script lines that issued it."""

    op: str = fact("Op", default="")
    lines: list[int] = fact("Script lines", doc="observed during the first optimizer step", factory=list)


@dataclass
class BlockerHit:
    """A blocker finding of the scan on the line the script crashed at."""

    line: int = fact("Line", default=0)
    rule: str = fact("Rule", doc="the row of neuronkit/data/cuda_port_rules.toml", default="")
    code: str = fact("Code", default="")


@dataclass
class ScriptRun:
    """The rewritten script run on the device for a few optimizer steps (`neuronkit port --run`)."""

    ok: bool = fact("Ran the asked steps", default=False)
    nproc: int = fact("Processes", "count", default=1)
    steps_asked: int = fact("Optimizer steps asked", "count", default=0)
    steps: int = fact("Optimizer steps taken", "count", default=0)
    wall_s: float = fact("Wall time", "s", default=0.0)
    returncode: int = fact("Exit status", default=0)
    error: str | None = fact("Error", doc="the script's exception, when it crashed")
    error_line: int | None = fact("Error line", doc="the script's line the error came from")
    blockers_hit: list[BlockerHit] = fact("Blockers hit", factory=list)
    fallbacks: list[ScriptFallback] = fact("CPU fallbacks", factory=list)
    peak_memory: dict[str, int] = fact("Peak memory per core", "bytes", factory=dict)
    neff_compiles: int = fact("NEFF compiles", "count", default=0)
    neff_cache_hits: int = fact("NEFF cache hits", "count", default=0)


@dataclass
class ScriptEvidence:
    """`neuronkit run MODEL --script train.py`: the user's training script, scanned, rewritten and run
    (`script.json` in the run directory; the report's "Your script" section)."""

    script: str = fact("Script", default="")
    verdict: str = fact("Verdict", doc="ready, or blocked by a blocker finding or a failed run", default="")
    counts: dict[str, int] = fact("Findings per category", "count", factory=dict)
    findings: list[ScriptFinding] = fact("Findings", factory=list)
    diff: str = fact("Rewrite diff", doc="unified diff of the rewrite fixes", default="")
    run: ScriptRun | None = fact("Run on the device")
