"""The stage model: every workbook stage and `neuronkit check` step, defined once in
`neuronkit/data/stages.toml` (or the table `NEURONKIT_STAGES` names), read into `Stage` and `Step` records
that the runner, the flow, the report, the lesson helpers, nbval and `check()` read. Each stage's code is one
folder, `neuronkit/stages/<name>/` (or a row's `module`), whose parts are found by name: its options type in
its `__init__`, its record types in `evidence.py` (both imported when the table is read: they import shared rows
only, never the pipeline), `run.py` (`run`, `next_step`), `steps.py` (`run_<step>`), `report.py`.
"""

from __future__ import annotations

import importlib
import importlib.util
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from neuronkit import env
from neuronkit.resources import data_dir

TABLE_VARIABLE = "NEURONKIT_STAGES"
STAGES_PACKAGE = "neuronkit.stages"


@dataclass(frozen=True)
class Step:
    """One `neuronkit check` step: its record type, the step it is compared against (if any) and the stage
    folder whose `steps.run_<name>` is its body."""

    name: str
    evidence: type[Any]
    module: str
    requires: str | None = None

    def body(self) -> Any:
        """The step's body, `run_<name>(check, record) -> (status, summary)` of its stage's `steps` module."""
        return getattr(importlib.import_module(f"{self.module}.steps"), f"run_{self.name}")


@dataclass(frozen=True)
class Stage:
    """One workbook stage: a notebook that runs it, the record it writes, and the folder of its code."""

    name: str
    notebook: str  # file stem, e.g. "02_eager_on_neuron"
    title: str
    evidence: type[Any]
    module: str  # its folder, e.g. "neuronkit.stages.eager"
    options: type[Any] | None = None  # its folder's options type (`EagerOptions`): its part of the run configuration
    requires: tuple[str, ...] = ()
    starts_after: tuple[str, ...] = ()  # of `requires`, those whose end its notebook's start waits for
    steps: tuple[str, ...] = ()
    blocking: tuple[str, ...] = ()
    foundation: bool = False
    runs_model: bool = False
    headline: bool = False  # its report numbers lead the report's
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

    def part(self, name: str) -> ModuleType | None:
        """Its folder's module `name` (`run`, `steps`, `report`), None when the folder has none."""
        full = f"{self.module}.{name}"
        return importlib.import_module(full) if importlib.util.find_spec(full) is not None else None


def table_path() -> Path:
    """The stage table read: `NEURONKIT_STAGES` when set, else the package's `data/stages.toml`."""
    given = env.text(TABLE_VARIABLE)
    return Path(given) if given is not None else data_dir() / "stages.toml"


def _record_type(module: str, name: str, where: str) -> type[Any]:
    cls = getattr(importlib.import_module(f"{module}.evidence"), name, None)
    if not isinstance(cls, type):
        raise ValueError(f"stages.toml: {where} names record type {name!r}, which {module}.evidence lacks")
    return cls


def _tuple(entry: dict[str, Any], key: str) -> tuple[str, ...]:
    return tuple(entry.get(key, ()))


def _starts_after(entry: dict[str, Any]) -> tuple[str, ...]:
    starts_after = tuple(entry.get("starts_after", entry.get("requires", ())))
    if not set(starts_after) <= set(entry.get("requires", ())):
        raise ValueError(f"stages.toml: stage {entry['name']}'s starts_after {list(starts_after)} is not part of its "
                         "requires")
    return starts_after


def _stage(entry: dict[str, Any]) -> Stage:
    module = entry.get("module", f"{STAGES_PACKAGE}.{entry['name']}")
    options = getattr(importlib.import_module(module), entry["options"]) if "options" in entry else None
    return Stage(name=entry["name"], notebook=entry["notebook"], title=entry["title"],
                 evidence=_record_type(module, entry["evidence"], entry["name"]), module=module,
                 options=options, requires=_tuple(entry, "requires"),
                 starts_after=_starts_after(entry), steps=_tuple(entry, "steps"), blocking=_tuple(entry, "blocking"),
                 foundation=bool(entry.get("foundation", False)), runs_model=bool(entry.get("runs_model", False)),
                 headline=bool(entry.get("headline", False)), checked=_tuple(entry, "checked"))


def _load(path: Path) -> tuple[tuple[Stage, ...], tuple[Step, ...], str]:
    with path.open("rb") as fh:
        table = tomllib.load(fh)
    stages = tuple(_stage(entry) for entry in table["stage"])
    owner = {step: stage.module for stage in stages for step in stage.steps}
    steps = []
    for entry in table.get("step", ()):
        if entry["name"] not in owner:
            raise ValueError(f"stages.toml: step {entry['name']} belongs to no stage's `steps`")
        module = owner[entry["name"]]
        steps.append(Step(entry["name"], _record_type(module, entry["evidence"], f"step {entry['name']}"), module,
                          entry.get("requires")))
    return stages, tuple(steps), table["report_notebook"]


WORKBOOK, CHECK_STEPS, REPORT_NOTEBOOK = _load(table_path())
STAGE: dict[str, Stage] = {s.name: s for s in WORKBOOK}
STEP: dict[str, Step] = {s.name: s for s in CHECK_STEPS}
# Every stage's options type, in stage order (the run configuration's parts).
OPTIONS: tuple[type[Any], ...] = tuple(s.options for s in WORKBOOK if s.options is not None)


def notebook_after(stage: str) -> str:
    """The notebook a learner opens after `stage`'s: the next stage's, or the report's after the last."""
    names = [s.name for s in WORKBOOK]
    index = names.index(stage) + 1
    return WORKBOOK[index].notebook if index < len(WORKBOOK) else REPORT_NOTEBOOK
