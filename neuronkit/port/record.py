"""The "Your script" record of a workbook run: `run_dir/script.json`, a `ScriptEvidence`
(neuronkit/evidence.py) built from the scan and the run of `neuronkit run MODEL --script train.py`.

Kept apart from the stage records, as notebook 07's `distributed.json` is: the report shows it as its own
section and under `script` in report.json; a malformed file is ignored.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from neuronkit.evidence import ScriptEvidence, ScriptRun, load
from neuronkit.port.output import counts, finding_record
from neuronkit.port.run import RunResult
from neuronkit.port.scan import FileScan
from neuronkit.pipeline.record import RunDir

RECORD = "script.json"


def build(scan: FileScan, result: RunResult | None) -> ScriptEvidence:
    """The record of one scanned (and possibly run) script."""
    run = load(ScriptRun, {k: v for k, v in result.record().items() if k not in ("script", "ranks")}) \
        if result is not None else None
    blocked = any(f.category == "blocker" for f in scan.findings) or (run is not None and not run.ok)
    doc = {"script": str(scan.path), "verdict": "blocked" if blocked else "ready", "counts": counts([scan]),
           "findings": [finding_record(f) for f in scan.findings], "diff": scan.diff()}
    evidence = load(ScriptEvidence, doc)
    evidence.run = run
    return evidence


def write(run_dir: str | Path, evidence: ScriptEvidence) -> Path:
    """Store the record as `run_dir/script.json`."""
    return RunDir(run_dir).write_side_record(RECORD, dataclasses.asdict(evidence))


def read(run_dir: str | Path) -> dict[str, Any] | None:
    """The stored record as a dict (None when absent or malformed)."""
    data = RunDir(run_dir).read_side_record(RECORD)
    return dataclasses.asdict(load(ScriptEvidence, data)) if isinstance(data, dict) else None
