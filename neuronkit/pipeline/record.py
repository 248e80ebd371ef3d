"""Stage results and the run directory: the one record type every workbook stage and every
`neuronkit check` step writes, and the one status set they share.

Stages never read each other's objects, only these JSON records (and the artefacts they name), so a
notebook, the CLI and the report all see the same evidence, and a stage that failed still leaves a
record saying what happened. A stage whose code raised is `error`, never `fail`: `fail` is a verdict
on the model, `error` says the check could not reach one.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Generic, Iterable, Literal, TypeVar, cast

from neuronkit.errors import NeuronkitInputError
from neuronkit.evidence import load
from neuronkit.pipeline.stage import CHECK_STEPS, STAGE, WORKBOOK

Status = Literal["pass", "warn", "fail", "error", "skipped"]
# Every status, least to most severe: the order `worst` ranks by (an error outranks a failure, as it
# leaves the question open).
STATUSES: tuple[str, ...] = ("skipped", "pass", "warn", "fail", "error")
OK_STATUSES: tuple[str, ...] = ("pass", "warn")  # what a stage that depends on this one may build on

# The workbook's stages in order, name → number (the notebook's and the record file's prefix), and
# `neuronkit check`'s steps in order: both from the one stage table (neuronkit/data/stages.toml).
STAGES: dict[str, str] = {stage.name: stage.number for stage in WORKBOOK}
CHECK_STAGES: tuple[str, ...] = tuple(step.name for step in CHECK_STEPS)
# 2: typed evidence per stage (each stage folder's evidence.py), `check` stage records are StageResults, `error`
# for a stage that raised, compile parity measured against the CPU reference.
# 3: `check` stages record typed evidence too (each step's Step.evidence: timing is flat, buckets are one
# BucketPlan with padded tokens and counts per bucket); the eager and compile records extend them.
# 4: the last dict fields typed (environment params: RunParams, compile graph_metrics: CompiledGraph, profile
# hardware: RooflineHardware, script blockers_hit: BlockerHit); the audit evidence is the audit's own record.
SCHEMA_VERSION = 4
# The report neuronkit.reporting writes into a run directory, from its records.
REPORT_HTML, REPORT_JSON = "report.html", "report.json"


E = TypeVar("E")


def worst(statuses: Iterable[str], default: Status = "skipped") -> Status:
    """The most severe of `statuses` (STATUSES order), `default` when there are none."""
    return cast(Status, max(statuses, key=STATUSES.index, default=default))


@dataclass
class StageResult(Generic[E]):
    """What one stage concluded and the evidence behind it (JSON through `to_dict`, typed again through
    `from_dict`)."""

    stage: str
    status: Status
    summary: str
    # The stage's typed record (its `Stage.evidence` or `Step.evidence`, neuronkit/data/stages.toml); read
    # back from JSON as the same type, the empty record when the stage recorded none (skipped before it
    # began; None until then).
    evidence: E | None = None
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
        """A plain dict with non-finite floats made JSON-safe (no evidence: `{}`)."""
        data: dict[str, Any] = json_safe(asdict(self))
        data["evidence"] = data["evidence"] or {}
        return data

    @property
    def recorded(self) -> E | None:
        """The evidence, None when the stage recorded none (None, or its type's empty record: skipped, or a
        crash before the stage recorded anything)."""
        empty = self.evidence is None or self.evidence == type(self.evidence)()
        return None if empty else self.evidence

    @property
    def ok(self) -> bool:
        """True when later stages may build on this one (`pass` or `warn`)."""
        return self.status in OK_STATUSES

    @classmethod
    def from_dict(cls, data: dict[str, Any], evidence: type[E]) -> StageResult[E]:
        """Rebuild a record read from JSON, its evidence as record type `evidence` (the one `load` at the
        JSON boundary), ignoring keys a newer version added; a record of an older schema is refused with
        one line (its evidence has another shape)."""
        version = data.get("schema_version", 1)
        if not isinstance(version, int) or version < SCHEMA_VERSION:
            raise NeuronkitInputError(
                f"the {data.get('stage', '?')} record has schema version {version}, from an older neuronkit; "
                f"this one reads version {SCHEMA_VERSION}: run the stage again")
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["evidence"] = load(evidence, known.get("evidence"))  # {} or absent: the empty record
        return StageResult(**known)


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
        return self.stages_dir / STAGE[stage].record_file

    def write(self, result: StageResult[Any]) -> None:
        """Write a stage's record atomically (a reader never sees half a file)."""
        self.stages_dir.mkdir(parents=True, exist_ok=True)
        target = self.stage_path(result.stage)
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True, default=str))
        tmp.replace(target)

    def read(self, stage: str) -> StageResult[Any] | None:
        """The stage's record, or None when the stage has not run."""
        path = self.stage_path(stage)
        if not path.exists():
            return None
        return StageResult.from_dict(json.loads(path.read_text()), STAGE[stage].evidence)

    def results(self) -> dict[str, StageResult[Any] | None]:
        """Every stage in workbook order, None where no record exists."""
        return {stage: self.read(stage) for stage in STAGES}

    def write_params(self, params: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        target = self.path / "params.json"
        target.write_text(json.dumps(json_safe(params), indent=2, sort_keys=True, default=str))

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


def unmet(needed: str, record: StageResult[Any] | None) -> str:
    """Why a stage that needs `needed`'s pass/warn record cannot run (`record` is missing, or not ok):
    `eager failed (fail: <its summary>)`, the cause named first."""
    if record is None:
        return f"{needed} has no record"
    if record.status == "skipped":  # its own reason, without a second "skipped: "
        return f"{needed} was skipped ({first_line(record.summary).removeprefix('skipped: ')})"
    return f"{needed} failed ({record.status}: {first_line(record.summary)})"


class SpelledOnce:
    """Error messages spelled out once in lines read in order (`check`'s table, a workbook stage's summary of
    its check steps, `neuronkit run`'s progress lines): a refused op stops several stages alike, and its
    message carries a paragraph of remedy. The first stage that meets one gives it whole; a later one says
    `the same error as <that stage>`, and so does a skipped stage's reason that quotes it."""

    def __init__(self) -> None:
        self._first: dict[str, str] = {}  # message -> the stage that gave it whole

    def error(self, stage: str, message: str) -> str:
        """`message`, the first time a stage gives it; after that, `the same error as <stage>`."""
        if message in self._first:
            return f"the same error as {self._first[message]}"
        self._first[message] = stage
        return message

    def quoted(self, text: str) -> str:
        """`text` (a reason that quotes another stage's error, `unmet`) with each message already given whole
        replaced by `the same error as <stage>`."""
        for message, stage in self._first.items():
            text = text.replace(message, f"the same error as {stage}")
        return text


def skipped(stage: str, reason: str, evidence: E | None = None) -> StageResult[E]:
    """The record of a stage that could not run, and why (what it needs did not pass)."""
    return StageResult(stage, "skipped", reason, evidence, error=reason, duration_s=0.0, finished_at=now())


def kept(run: RunDir | None, result: StageResult[E]) -> StageResult[E]:
    """`result` written into `run` and read back (what every later reader gets), or as it is without a run."""
    if run is None:
        return result
    run.write(result)
    stored: StageResult[E] | None = run.read(result.stage)
    return stored or result


def first_line(value: object) -> str:
    """The first line of a value's text (an exception's message, a summary), or its type's name."""
    text = str(value).strip()
    return text.splitlines()[0] if text else type(value).__name__


def now() -> str:
    """The local time as an ISO-8601 string, as records store it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
