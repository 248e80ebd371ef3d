"""The stage model: every workbook stage and `neuronkit check` step, defined once.

`neuronkit/data/stages.toml` holds one entry per stage (name, notebook, title, evidence type, what it
requires, the check steps it runs, which statuses block the verdict, what nbval checks); this module
reads it into `Stage` and `Step` records. The run directory, the stage flow, the runner, the report, the
notebooks' lesson helpers, nbval and `check()` read these records instead of keeping tables of their own.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

from neuronkit import evidence
from neuronkit.resources import data_dir


@dataclass(frozen=True)
class Step:
    """One `neuronkit check` step: its record type and the step it is compared against (if any)."""

    name: str
    evidence: type
    requires: str | None = None


@dataclass(frozen=True)
class Stage:
    """One workbook stage: a notebook that runs it and the record it writes."""

    name: str
    notebook: str  # file stem, e.g. "02_eager_on_neuron"
    title: str
    evidence: type
    requires: tuple[str, ...] = ()
    starts_after: tuple[str, ...] = ()  # of `requires`, those whose end its notebook's start waits for
    steps: tuple[str, ...] = ()
    blocking: tuple[str, ...] = ()
    foundation: bool = False
    runs_model: bool = False
    checked: tuple[str, ...] = ()

    @property
    def number(self) -> str:
        """The two-digit prefix of its notebook and of its record file."""
        return self.notebook[:2]

    @property
    def ipynb(self) -> str:
        """The notebook's file name."""
        return f"{self.notebook}.ipynb"

    @property
    def record_file(self) -> str:
        """Its record's file name under `stages/`."""
        return f"{self.number}_{self.name}.json"


def _evidence_type(name: str, where: str) -> type:
    cls = getattr(evidence, name, None)
    if not isinstance(cls, type):
        raise ValueError(f"stages.toml: {where} names evidence type {name!r}, which neuronkit/evidence.py lacks")
    return cls


def _tuple(entry: dict[str, Any], key: str) -> tuple[str, ...]:
    return tuple(entry.get(key, ()))


def _starts_after(entry: dict[str, Any]) -> tuple[str, ...]:
    starts_after = tuple(entry.get("starts_after", entry.get("requires", ())))
    if not set(starts_after) <= set(entry.get("requires", ())):
        raise ValueError(f"stages.toml: stage {entry['name']}'s starts_after {list(starts_after)} is not part of its requires")
    return starts_after


def _load() -> tuple[tuple[Stage, ...], tuple[Step, ...], str]:
    with (data_dir() / "stages.toml").open("rb") as fh:
        table = tomllib.load(fh)
    stages = tuple(Stage(name=e["name"], notebook=e["notebook"], title=e["title"],
                         evidence=_evidence_type(e["evidence"], e["name"]), requires=_tuple(e, "requires"),
                         starts_after=_starts_after(e),
                         steps=_tuple(e, "steps"), blocking=_tuple(e, "blocking"),
                         foundation=bool(e.get("foundation", False)), runs_model=bool(e.get("runs_model", False)),
                         checked=_tuple(e, "checked")) for e in table["stage"])
    steps = tuple(Step(e["name"], _evidence_type(e["evidence"], f"step {e['name']}"), e.get("requires"))
                  for e in table["step"])
    return stages, steps, table["report_notebook"]


WORKBOOK, CHECK_STEPS, REPORT_NOTEBOOK = _load()
STAGE: dict[str, Stage] = {s.name: s for s in WORKBOOK}
STEP: dict[str, Step] = {s.name: s for s in CHECK_STEPS}


def notebook_after(stage: str) -> str:
    """The notebook a learner opens after `stage`'s: the next stage's, or the report's after the last."""
    names = [s.name for s in WORKBOOK]
    index = names.index(stage) + 1
    return WORKBOOK[index].notebook if index < len(WORKBOOK) else REPORT_NOTEBOOK
