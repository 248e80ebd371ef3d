"""`neuronkit check`'s steps on a session, staged: `check(session, steps)`.

The migration order the behaviour doc recommends (§2 eager first, §3 then `torch.compile`): the eager
and compiled runs are each compared with the CPU reference, and every step is a `StageResult` with
pass / warn / fail and its evidence. A step that raises is recorded as `error` with the traceback (the
check could not reach a verdict) and the next steps still run; a step whose input is missing (the CPU
reference, or the compiled model timing needs) says `skipped` and why. Each step's body is its stage
folder's (`Step.body`: `neuronkit/stages/<name>/steps.py`); this module runs them, holds what they hand each
other (`CheckRun`), and keeps the helpers several stages' steps share.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch

from neuronkit import models
from neuronkit.errors import NeuronkitInputError
from neuronkit.evidence import CheckStage, ModelSlice, Parity, ParityRow, rows
from neuronkit.graph_compile import compare
from neuronkit.json_text import json_text
from neuronkit.pipeline import refusals
from neuronkit.pipeline.config import RunConfig
from neuronkit.pipeline.execute import Recording, recording
from neuronkit.pipeline.reference import Reference
from neuronkit.pipeline.record import CHECK_STAGES, SpelledOnce, StageResult, Status, skipped, unmet, worst
from neuronkit.pipeline.session import Session, ran_on
from neuronkit.pipeline.stage import STEP
from neuronkit.slicing import frozen_parameters


@dataclass
class CheckReport:
    """All steps of one `check()` run, JSON-serializable. `weights` says where the model's weights came
    from; its warnings (random weights, checkpoint weights missing or dropped) make the status `warn`."""

    model: str
    dtype: str
    stages: list[StageResult[Any]]
    weights: models.Weights = field(default_factory=lambda: models.Weights("module"))
    model_slice: ModelSlice | None = None  # what ran: the full model or a layer slice (None: a module passed in)
    # the checkpoint's class and where it comes from: "config.json", or how it was inferred from the weights
    # (`models.architecture_of`); None for a module passed in
    architecture: tuple[str, str] | None = None

    @property
    def warnings(self) -> list[str]:
        return self.weights.warnings()

    @property
    def status(self) -> Status:
        """The worst step status, at least `warn` with weight warnings (`skipped` only when nothing ran)."""
        return worst([s.status for s in self.stages] + ["warn"] * bool(self.warnings))

    @property
    def ok(self) -> bool:
        """True when no step failed or raised."""
        return all(s.status not in ("fail", "error") for s in self.stages)

    def stage(self, name: str) -> StageResult[Any] | None:
        """The record of check step `name`, None when it was not run."""
        return next((s for s in self.stages if s.stage == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "dtype": self.dtype, "status": self.status, "ok": self.ok,
                "random_weights": self.weights.random, "weights": self.weights.to_dict(),
                "model_slice": dataclasses.asdict(self.model_slice) if self.model_slice else None,
                "architecture": dict(zip(("class", "from"), self.architecture)) if self.architecture else None,
                "stages": [s.to_dict() for s in self.stages]}

    def to_json(self, path: str | Path | None = None) -> str:
        """The report as JSON text, also written to `path` when given."""
        return json_text(self.to_dict(), path, sort_keys=True, default=str)

    def table(self) -> str:
        """A fixed-width table: step, status, seconds, summary."""
        random = ", random weights" if self.weights.random else ""
        lines = [f"neuronkit check: {self.model} ({self.dtype}{random}) -> {self.status.upper()}"]
        if self.model_slice is not None and not self.model_slice.full_model:
            lines.append(f"ran on {self.model_slice.describe()} ({self.model_slice.reason})")
        if self.architecture is not None and self.architecture[1] != "config.json":
            lines.append(f"ran as {self.architecture[0]}, inferred: {self.architecture[1]}")
        lines += [f"warning: {w}" for w in self.warnings]
        lines.append(f"{'stage':<9} {'status':<8} {'time':>7}  summary")
        said = SpelledOnce()  # an error several steps meet (a refused op in the model) is spelled out once
        for s in self.stages:
            lines.append(f"{s.stage:<9} {s.status.upper():<8} {s.duration_s or 0:>6.1f}s  {_once(said, s)}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The table in a notebook cell (escaped)."""
        return f"<pre>{html.escape(self.table())}</pre>"

    def verdict(self, own: Sequence[str]) -> tuple[Status, str]:
        """Status and summary of the steps a workbook stage owns: the worst of them (the whole check's
        status when they were all skipped because a step they compare against failed), and their summaries (an
        error several of them meet given once, as the table gives it)."""
        ran = [s for s in self.stages if s.stage in own]
        status = worst(s.status for s in ran)
        said = SpelledOnce()
        summary = "; ".join(f"{s.stage}: {_once(said, s).removesuffix('.')}" for s in ran)  # no ".;"
        return (self.status if status == "skipped" else status), summary

    def record_into(self, rec: Recording[Any], own: Sequence[str],
                    evidence: Callable[[dict[str, StageResult[Any]]], Any]) -> None:
        """Fill a workbook stage's recording from the steps it owns: its record (`evidence` of the steps'
        records) with the model slice they ran on, and their `verdict`, which notes a layer slice."""
        rec.evidence = record = evidence({s.stage: s for s in self.stages})
        record.model_slice = self.model_slice
        rec.status, rec.summary = self.verdict(own)
        rec.summary += ran_on(self.model_slice)


def _once(said: SpelledOnce, step: StageResult[Any]) -> str:
    """A step's summary, an error already given by an earlier step (or quoted in a skipped step's reason) as
    `the same error as <step>`."""
    if step.status == "error":
        return said.error(step.stage, step.summary)
    return said.quoted(step.summary) if step.status == "skipped" else step.summary


class CheckRun:
    """One `check()` call on a session: the run configuration its steps read their options from, the
    model on the device (the session's, else a copy made once), the CPU reference and its outputs, the
    compiled model, and each step's record so far."""

    def __init__(self, session: Session, config: RunConfig) -> None:
        self.session = session
        self.config = config
        self.reference: Reference | None = session.reference  # the CPU baseline's, or the cpu step's
        self.cpu_out: dict[str, torch.Tensor] = {}
        self._neuron: tuple[torch.nn.Module, list[list[str]]] | None = None
        self.neuron_inputs: Any = None
        self.compiled: torch.nn.Module | None = None  # the compile step's, which the timing step times
        self.lent = session.device_model or (session.compiled.module._orig_mod if session.compiled else None)
        self.results: dict[str, StageResult[Any]] = {}  # each step's record, read by the steps after it

    def neuron(self) -> tuple[torch.nn.Module, list[list[str]]]:
        """The model on the device: the session's (`device_model`, or the module under the caller's
        compiled model), else a copy made once; its embeddings and head without gradients while the session
        freezes them; and the tied parameter groups `.to()` had untied."""
        if self._neuron is None:
            s = self.session
            model, untied = self._neuron = (self.lent, []) if self.lent is not None else \
                compare.device_copy(s.model, "neuron")
            for param in frozen_parameters(model, s.freeze):
                param.requires_grad_(False)
            self.neuron_inputs = compare.move_inputs(s.inputs, "neuron")
        return self._neuron


def check(session: Session, steps: Iterable[str] = CHECK_STAGES, config: RunConfig | None = None) -> CheckReport:
    """Run `neuronkit check`'s `steps` (and the steps they compare against) on `session`, each step's
    options read from `config` (default: the session's). The session's device model is lent to the steps
    and given back with its mode and gradient flags as they were."""
    run = CheckRun(session, config or session.config)
    with _lent(run.lent):
        for name in resolve_steps(steps):
            run.results[name] = run_step(name, run)
    return CheckReport(session.name, str(session.dtype).removeprefix("torch."), list(run.results.values()),
                       session.weights, session.model_slice)


def check_stages(steps: dict[str, StageResult[Any]]) -> list[CheckStage]:
    """The check steps a workbook stage ran, as its record lists them (status and summary, no evidence)."""
    return [CheckStage(s.stage, s.status, s.summary, s.duration_s, s.error) for s in steps.values()]


def resolve_steps(steps: Iterable[str]) -> list[str]:
    """The steps asked for, with those they compare against (`Step.requires`), in the table's order."""
    names = [steps] if isinstance(steps, str) else list(steps)
    unknown = [n for n in names if n not in CHECK_STAGES]
    if unknown or not names:
        raise NeuronkitInputError(f"unknown stage(s) {unknown or names!r}; choose from {', '.join(CHECK_STAGES)}")
    wanted = set(names)
    for name in names:  # and what each compares against (Step.requires: eager and compile the CPU reference)
        while (needed := STEP[name].requires) is not None:
            wanted.add(name := needed)
    return [s for s in CHECK_STAGES if s in wanted]


def run_step(name: str, run: CheckRun) -> StageResult[Any]:
    """One check step, by the one stage executor (`recording`): skipped when the step it compares against
    did not pass; a crash is its `error` record, and the next steps still run."""
    step = STEP[name]
    needed, results = step.requires, run.results
    record = step.evidence()
    if needed is not None and not results[needed].ok:
        return skipped(name, f"skipped: {unmet(needed, results[needed])}; {name} needs it", record)
    with recording(None, name, record, reraise=False, explain=refusals.explain) as rec:
        rec.status, rec.summary = step.body()(run, record)
    return rec.done()


@contextlib.contextmanager
def _lent(model: torch.nn.Module | None) -> Iterator[None]:
    """The caller's device model, in eval mode inside the block; afterwards its mode and gradient flags are
    as they were."""
    if model is None:
        yield
        return
    was_training, flags = model.training, [(p, p.requires_grad) for p in model.parameters()]
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
        for param, flag in flags:
            param.requires_grad_(flag)


# ---------------------------------------------------------------------------------------------------
# What several stages' steps share.


@contextlib.contextmanager
def gradients_for(model: torch.nn.Module, freeze: bool, *, restore: bool = False) -> Iterator[list[str]]:
    """Inside the block, `model`'s parameters take gradients except the embeddings and head when `freeze`;
    after it, their gradient flags are as they were, their gradients cleared, and with `restore` their
    values too (a training run on the model itself, undone). Yields the names held fixed."""
    frozen = {id(p) for p in frozen_parameters(model, freeze)}
    named = list(model.named_parameters())
    flags = [(p, p.requires_grad) for _, p in named]
    saved = [(p, p.detach().clone()) for _, p in named if restore and p.requires_grad and id(p) not in frozen]
    for _, param in named:
        param.requires_grad_(param.requires_grad and id(param) not in frozen)
    try:
        yield [name for name, p in named if id(p) in frozen]
    finally:
        with torch.no_grad():
            for param, value in saved:
                param.copy_(value)
        for param, flag in flags:
            param.requires_grad_(flag)
            param.grad = None


def parity(run: CheckRun, out: Any) -> Parity:
    """A device run's outputs against the CPU reference's."""
    return Parity(outputs=rows(ParityRow, compare.compare_outputs(run.cpu_out, out, run.session.tol)),
                  top1_agreement=compare.top1_agreement(run.cpu_out, out))


def autocast_name(session: Session) -> str | None:
    """The dtype the steps autocast to, None for float32 (no autocast)."""
    return None if session.dtype is torch.float32 else str(session.dtype).removeprefix("torch.")


def top1_note(top1: float | None, tol: compare.Tolerance) -> list[str]:
    """A note when the top-1 token agreement is below the tolerance's floor."""
    return [f"top-1 agreement {top1:.1%} below {tol.min_top1:.0%}"] if top1 is not None and top1 < tol.min_top1 else []


def worst_error(rows: Sequence[ParityRow]) -> str:
    """The largest absolute error of any output, in words."""
    errors = [r for r in rows if r.max_abs_err is not None]
    if not errors:
        return "no floating outputs" if not rows else "see outputs"
    worst = max(errors, key=lambda r: r.max_abs_err or 0.0)
    return f"max abs err {worst.max_abs_err:.1e} on {worst.name}"
