"""How the stages follow each other: which records a stage needs, and the `skipped` record it writes
when one of them is missing or did not pass, so a notebook always runs to its end and the report can
say why a stage has no result."""

from __future__ import annotations

from typing import Any

from neuronkit.errors import NeuronkitInputError
from neuronkit.pipeline.config import Params
from neuronkit.pipeline.record import REPORT_HTML, REPORT_JSON, STAGES, RunDir, StageResult, kept, skipped, unmet
from neuronkit.pipeline.stage import STAGE


def start_run(params: Params) -> None:
    """Begin a run in `params.run_dir`: record the parameters and drop the records and report of an earlier
    run of the same model there. A directory holding another model's run is refused, never emptied."""
    run = params.run
    earlier = run.read_params().get("model")
    if earlier is not None and earlier != params.model:
        raise NeuronkitInputError(
            f"{params.run_dir} holds the run of {earlier}; set run_dir to a new directory for {params.model} "
            "(or delete that one first)")
    for stage in STAGES:
        run.stage_path(stage).unlink(missing_ok=True)
    for name in (REPORT_HTML, REPORT_JSON):
        (run.path / name).unlink(missing_ok=True)
    run.write_params(params.to_dict())


def check_same_run(params: Params) -> None:
    """Refuse to add a stage to a run that was started with other parameters (a report mixing models)."""
    recorded, given = params.run.read_params(), params.to_dict()
    if recorded and recorded != given:
        changed = sorted(k for k in set(recorded) | set(given) if recorded.get(k) != given.get(k))
        detail = ", ".join(f"{k}: run has {recorded.get(k)!r}, notebook has {given.get(k)!r}" for k in changed)
        raise NeuronkitInputError(
            f"{params.run_dir} holds a run started with other parameters ({detail}); use the same parameters "
            f"as 00_environment, or start a new run there")


def blocked_by(run: RunDir, stage: str) -> str | None:
    """Why `stage` cannot run yet, naming its first prerequisite (in the migration order, so the earliest
    cause) without a pass/warn record: `eager failed (fail: ...)`; None when it may run."""
    for needed in STAGE[stage].requires:  # the migration order: neuronkit/data/stages.toml
        record = run.read(needed)
        if record is None:
            return f"{unmet(needed, None)}: run notebook {STAGE[needed].notebook} first"
        if not record.ok:
            return unmet(needed, record)
    return None


def skip(run: RunDir, stage: str, reason: str) -> StageResult[Any]:
    """Write and return a `skipped` record for `stage` carrying the reason (read back, as every reader sees
    it: its evidence the stage's empty record)."""
    return kept(run, skipped(stage, reason))


def begin(params: Params, stage: str) -> StageResult[Any] | None:
    """Enter a stage: refuse a mismatched run; return the `skipped` record when a prerequisite is
    missing or failed, None when the stage may run."""
    check_same_run(params)
    reason = blocked_by(params.run, stage)
    return skip(params.run, stage, reason) if reason else None
