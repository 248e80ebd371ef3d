"""Stage results and the run directory: the one record type every workbook stage and every
`neuronkit check` stage writes, and the one status set they share.

Stages never read each other's objects, only these JSON records (and the artefacts they name), so a
notebook, the CLI and the report all see the same evidence, and a stage that failed still leaves a
record saying what happened. A stage whose code raised is `error`, never `fail`: `fail` is a verdict
on the model, `error` says the check could not reach one.
"""

from __future__ import annotations

import json
import math
import time
import traceback
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

from neuronkit.errors import NeuronkitInputError

Status = Literal["pass", "warn", "fail", "error", "skipped"]
# Every status, least to most severe: the order `worst` ranks by (an error outranks a failure, as it
# leaves the question open).
STATUSES: tuple[str, ...] = ("skipped", "pass", "warn", "fail", "error")
OK_STATUSES: tuple[str, ...] = ("pass", "warn")  # what a stage that depends on this one may build on

# The workbook's stages in order; the number is the notebook's and the record file's prefix.
STAGES: dict[str, str] = {
    "environment": "00",
    "cpu_baseline": "01",
    "eager": "02",
    "audit": "03",
    "compile": "04",
    "profile": "05",
}
# `neuronkit check`'s stages in order (neuronkit/checks/parity.py); the workbook's eager and compile
# stages run some of them and keep their records in their evidence.
CHECK_STAGES: tuple[str, ...] = ("cpu", "eager", "generate", "train", "compile", "timing")
# 2: typed evidence per stage (neuronkit/evidence.py), `check` stage records are StageResults, `error`
# for a stage that raised, compile parity measured against the CPU reference.
# 3: `check` stages record typed evidence too (evidence.CHECK_EVIDENCE: timing is flat, buckets are one
# BucketPlan with padded tokens and counts per bucket); the eager and compile records extend them.
SCHEMA_VERSION = 3
# The report neuronkit.reporting writes into a run directory, from its records.
REPORT_HTML, REPORT_JSON = "report.html", "report.json"


def worst(statuses: Iterable[str], default: str = "skipped") -> str:
    """The most severe of `statuses` (STATUSES order), `default` when there are none."""
    return max(statuses, key=STATUSES.index, default=default)


@dataclass
class StageResult:
    """What one stage concluded and the evidence behind it (all JSON-serializable)."""

    stage: str
    status: Status
    summary: str
    # The stage's typed record (neuronkit.evidence) as the stage built it; its plain dict once written
    # as JSON and read back (`to_dict` turns a record into that dict).
    evidence: Any = field(default_factory=dict)
    error: str | None = None
    duration_s: float | None = None
    finished_at: str | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.stage not in STAGES and self.stage not in CHECK_STAGES:
            raise ValueError(f"unknown stage {self.stage!r}; expected one of {sorted({*STAGES, *CHECK_STAGES})}")
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")

    def to_dict(self) -> dict[str, Any]:
        """A plain dict with non-finite floats made JSON-safe."""
        return json_safe(asdict(self))

    @property
    def ok(self) -> bool:
        """True when later stages may build on this one (`pass` or `warn`)."""
        return self.status in OK_STATUSES

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StageResult":
        """Rebuild a record read from JSON, ignoring keys a newer version added; a record of an older
        schema is refused with one line (its evidence has another shape)."""
        version = data.get("schema_version", 1)
        if not isinstance(version, int) or version < SCHEMA_VERSION:
            raise NeuronkitInputError(
                f"the {data.get('stage', '?')} record has schema version {version}, from an older neuronkit; "
                f"this one reads version {SCHEMA_VERSION}: run the stage again")
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


def json_safe(value: Any) -> Any:
    """`value` with non-finite floats, tuples and paths made JSON-safe (NaN: null, inf: "inf")."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
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
        target.write_text(json.dumps(json_safe(params), indent=2, sort_keys=True, default=str))
        return target

    def read_params(self) -> dict[str, Any]:
        path = self.path / "params.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def write_side_record(self, name: str, record: dict[str, Any]) -> Path:
        """Store a record kept beside the stage records (notebook 07's, `run --script`'s) as `name`."""
        self.path.mkdir(parents=True, exist_ok=True)
        target = self.path / name
        target.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return target

    def read_side_record(self, name: str) -> Any:
        """A side record's JSON, or None when it is absent or not JSON."""
        try:
            return json.loads((self.path / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None


@contextmanager
def recording(run: RunDir | str | Path | None, stage: str) -> Iterator[dict[str, Any]]:
    """Run a stage body, always leaving a record: the body fills the yielded dict with `status`,
    `summary` and `evidence` (the stage's record type of `neuronkit.evidence`, stored as its dict); an
    exception becomes an `error` record and is re-raised."""
    run = RunDir(run) if run is not None and not isinstance(run, RunDir) else run
    slot: dict[str, Any] = {"status": "pass", "summary": "", "evidence": {}}
    start = time.perf_counter()
    try:
        yield slot
    except BaseException as exc:
        result = StageResult(stage, "error", f"{type(exc).__name__}: {exc}", _plain(slot.get("evidence", {})),
                             error="".join(traceback.format_exception(exc)),
                             duration_s=time.perf_counter() - start, finished_at=now())
        if run is not None:
            run.write(result)
        raise
    result = StageResult(stage, slot["status"], slot["summary"], _plain(slot["evidence"]),
                         duration_s=time.perf_counter() - start, finished_at=now())
    if run is not None:
        run.write(result)
    slot["result"] = result


def _plain(evidence: Any) -> dict[str, Any]:
    """A typed evidence record as the JSON-safe dict a record stores (a dict stays as it is)."""
    return json_safe(asdict(evidence)) if is_dataclass(evidence) else evidence


def now() -> str:
    """The local time as an ISO-8601 string, as records store it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
