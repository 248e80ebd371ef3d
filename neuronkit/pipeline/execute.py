"""The one stage executor, for workbook stages and `check()`'s steps alike: run a stage's body, always
leaving a record (`recording`); and a workbook stage's whole course (`run_stage`): enter it (a `skipped`
record when what it requires did not pass), apply the options its notebook gave to the run configuration,
run its body, record what it found or how it failed."""

from __future__ import annotations

import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, Iterator, TypeVar

from neuronkit.pipeline.config import Params
from neuronkit.pipeline.flow import begin
from neuronkit.pipeline.record import RunDir, StageResult, Status, first_line, kept, now

E = TypeVar("E")


@dataclass
class Recording(Generic[E]):
    """What a stage's body fills while it runs: its status and summary, and its typed record (`evidence`,
    which the caller may start, so a body that fills it as it goes keeps what it found if it raises).
    `result` is the record once the body is done."""

    evidence: E | None = None
    status: Status = "pass"
    summary: str = ""
    result: StageResult[E] | None = field(default=None, repr=False)

    def done(self) -> StageResult[E]:
        """The record (after the `recording` block)."""
        if self.result is None:
            raise RuntimeError("the stage's record is made when its `recording` block ends")
        return self.result


@contextmanager
def recording(run: RunDir | str | Path | None, stage: str, evidence: E | None = None, *, reraise: bool = True,
              explain: Callable[[BaseException], str | None] | None = None) -> Iterator[Recording[E]]:
    """Run a stage body, always leaving a record. The body fills the yielded `Recording`. An exception
    becomes an `error` record (its first line, with `explain`'s reason when it gives one); it is re-raised
    when `reraise` (a notebook stops there), else swallowed (the next check step still runs). The record,
    written into `run` when given and read back as every reader sees it, is the recording's `result`."""
    run = RunDir(run) if run is not None and not isinstance(run, RunDir) else run
    rec: Recording[E] = Recording(evidence)
    start = time.perf_counter()
    try:
        yield rec
    except BaseException as exc:
        cause = getattr(exc, "inner_exception", None) or exc  # Dynamo's BackendCompilerFailed names the backend
        summary = f"{type(cause).__name__}: {first_line(cause)}"
        if explain is not None and (why := explain(exc)) is not None:
            summary += f": {why}"
        rec.result = kept(run, StageResult(stage, "error", summary, rec.evidence,
                                           error="".join(traceback.format_exception(exc)),
                                           duration_s=time.perf_counter() - start, finished_at=now()))
        if reraise or not isinstance(exc, Exception):
            raise
        return
    rec.result = kept(run, StageResult(stage, rec.status, rec.summary, rec.evidence,
                                       duration_s=time.perf_counter() - start, finished_at=now()))


def run_stage(stage: str, params: Params, options: dict[str, Any],
              body: Callable[[Params, Recording[E]], None]) -> StageResult[E]:
    """Workbook stage `stage` on run `params`: its `skipped` record when a stage it requires did not pass;
    else `body(params, recording)` with the notebook's `options` applied to the run's configuration (a bad
    one is the stage's `error` record), recorded into the run directory."""
    skipped: StageResult[E] | None = begin(params, stage)
    if skipped is not None:
        return skipped
    rec: Recording[E]
    with recording(params.run, stage) as rec:
        body(params.with_options(**options), rec)
    return rec.done()
