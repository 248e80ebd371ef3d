"""Stage results and the run directory: the one record type every workbook stage writes.

Stages never read each other's objects, only these JSON records, so a notebook, the CLI and the report
all see the same evidence, and a stage that failed still leaves a record saying what happened.
"""

from __future__ import annotations

import json
import math
import time
import traceback
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

Status = Literal["pass", "warn", "fail", "error", "skipped"]
STATUSES: tuple[str, ...] = ("pass", "warn", "fail", "error", "skipped")

# The workbook's stages in order; the number is the notebook's and the record file's prefix.
STAGES: dict[str, str] = {
    "environment": "00",
    "cpu_baseline": "01",
    "eager": "02",
    "audit": "03",
    "compile": "04",
    "profile": "05",
}
SCHEMA_VERSION = 1


@dataclass
class StageResult:
    """What one stage concluded and the evidence behind it (all JSON-serializable)."""

    stage: str
    status: Status
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    duration_s: float | None = None
    finished_at: str | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"unknown stage {self.stage!r}; expected one of {sorted(STAGES)}")
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")

    def to_dict(self) -> dict[str, Any]:
        """A plain dict with non-finite floats made JSON-safe."""
        return _json_safe(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StageResult":
        """Rebuild a record read from JSON, ignoring keys a newer version added."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


class RunDir:
    """A workbook run directory: `params.json`, `stages/NN_<stage>.json`, and artefacts beside them."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def stages_dir(self) -> Path:
        return self.path / "stages"

    def artifact_dir(self, stage: str) -> Path:
        """A folder for a stage's bulky outputs (traces, Parquet, executed notebooks)."""
        folder = self.path / "artifacts" / stage
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def stage_path(self, stage: str) -> Path:
        return self.stages_dir / f"{STAGES[stage]}_{stage}.json"

    def write(self, result: StageResult) -> Path:
        """Write a stage's record atomically (a reader never sees half a file)."""
        self.stages_dir.mkdir(parents=True, exist_ok=True)
        target = self.stage_path(result.stage)
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True, default=str))
        tmp.replace(target)
        return target

    def read(self, stage: str) -> StageResult | None:
        """The stage's record, or None when the stage has not run."""
        path = self.stage_path(stage)
        if not path.exists():
            return None
        return StageResult.from_dict(json.loads(path.read_text()))

    def results(self) -> dict[str, StageResult | None]:
        """Every stage in workbook order, None where no record exists."""
        return {stage: self.read(stage) for stage in STAGES}

    def write_params(self, params: dict[str, Any]) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        target = self.path / "params.json"
        target.write_text(json.dumps(_json_safe(params), indent=2, sort_keys=True, default=str))
        return target

    def read_params(self) -> dict[str, Any]:
        path = self.path / "params.json"
        return json.loads(path.read_text()) if path.exists() else {}


@contextmanager
def recording(run: RunDir | str | Path | None, stage: str) -> Iterator[dict[str, Any]]:
    """Run a stage body, always leaving a record: the body fills the yielded dict with
    `status`, `summary` and `evidence`; an exception becomes an `error` record and is re-raised."""
    run = RunDir(run) if run is not None and not isinstance(run, RunDir) else run
    slot: dict[str, Any] = {"status": "pass", "summary": "", "evidence": {}}
    start = time.perf_counter()
    try:
        yield slot
    except BaseException as exc:
        result = StageResult(stage, "error", f"{type(exc).__name__}: {exc}", slot.get("evidence", {}),
                             error="".join(traceback.format_exception(exc)),
                             duration_s=time.perf_counter() - start, finished_at=now())
        if run is not None:
            run.write(result)
        raise
    result = StageResult(stage, slot["status"], slot["summary"], slot["evidence"],
                         duration_s=time.perf_counter() - start, finished_at=now())
    if run is not None:
        run.write(result)
    slot["result"] = result


def now() -> str:
    """The local time as an ISO-8601 string, as records store it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
