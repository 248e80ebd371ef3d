"""What a notebook shows a learner around a stage record: a few key numbers, the full record folded
away, a "Next" paragraph computed from what the step found, and widgets with a readable text twin.

Every object has an HTML (or Markdown) form and a plain-text twin, like `display`'s cards, so papermill
runs, text viewers and HTML exports show the same content; `<details>` folds without JavaScript.
"""

from __future__ import annotations

import html
from contextlib import contextmanager
from typing import Any, Iterator

from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.pipeline.stage import STAGE, WORKBOOK, notebook_after

_TILE = ("display:inline-block;min-width:9em;margin:0 .5em .5em 0;padding:.4em .7em;border:1px solid #d0d7de;"
         "border-radius:6px")


class KeyNumbers:
    """A row of labelled numbers (tiles in HTML, `label: value` lines in text)."""

    def __init__(self, numbers: dict[str, Any]) -> None:
        self.numbers = {label: str(value) for label, value in numbers.items()}

    def _repr_html_(self) -> str:
        return "<div>" + "".join(
            f'<div style="{_TILE}"><div style="font-size:.8em;color:#57606a">{html.escape(label)}</div>'
            f'<div style="font-size:1.25em;font-weight:600">{html.escape(value)}</div></div>'
            for label, value in self.numbers.items()) + "</div>"

    def __repr__(self) -> str:
        return "\n".join(f"{label}: {value}" for label, value in self.numbers.items())


def key_numbers(numbers: dict[str, Any]) -> KeyNumbers:
    """The 3-5 numbers a step is about, shown as tiles (the last expression of a cell displays them)."""
    return KeyNumbers(numbers)


class Folded:
    """Content behind a `<details>` summary line; in plain text, only that line."""

    def __init__(self, content: Any, title: str) -> None:
        self.content, self.title = content, title

    def _repr_html_(self) -> str:
        inner = self.content._repr_html_() if hasattr(self.content, "_repr_html_") else \
            f"<pre>{html.escape(repr(self.content))}</pre>"
        return f"<details><summary>{html.escape(self.title)}</summary>{inner}</details>"

    def __repr__(self) -> str:
        return f"{self.title} (folded: expand it in JupyterLab or an HTML export)"


def folded(content: Any, title: str) -> Folded:
    """`content` (a stage card, a table, ...) folded under `title`: the full evidence, out of the way."""
    return Folded(content, title)


class Markdown:
    """Markdown that reads as itself in plain text too (IPython's own shows `<... Markdown object>`)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


class Interactive:
    """A widget whose plain-text form says what it is instead of `VBox(children=...)`.

    The widget's own view (and the state papermill saves) is kept, so JupyterLab and widget-aware HTML
    exports render it; everything else shows the note. Callers display a static rendering first."""

    def __init__(self, widget: Any, note: str) -> None:
        self.widget, self.note = widget, note

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self.widget._repr_mimebundle_() or {})
        bundle["text/plain"] = self.note
        return bundle


def interactive(widget: Any, note: str) -> Interactive:
    """`widget` displayed with `note` as its text form (e.g. "interactive filter: run in JupyterLab")."""
    return Interactive(widget, note)


@contextmanager
def attempt(what: str) -> Iterator[None]:
    """Run a notebook's own demonstration; if it raises, print one line and let the notebook go on.

    The stage call after the demonstration is what records the step: a model that fails on the device
    must reach it and be recorded as failed (or skipped), not end the notebook with a traceback here."""
    try:
        yield
    except Exception as exc:  # whatever the user's model raises: the stage records the details
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        print(f"{what} failed on this model: {type(exc).__name__}: {first}\n"
              "The stage below runs the same step and records why.")


def next_step(result: StageResult[Any], run: RunDir | None = None) -> Markdown:
    """What to do after this stage, decided by what it found (status, fallbacks, blockers, breaks): its
    folder's `next_step` (`neuronkit/stages/<name>/run.py`), else the notebook after it.

    `run` lets a stage refer to an earlier stage's record (the audit to the eager run's fallbacks)."""
    reason = result.summary.strip().rstrip(".")
    if result.status == "error":
        return Markdown(f"**This step errored**: {reason}. Fix that first (the traceback is in the folded record "
                        "above), then run this notebook again.")
    if result.status == "skipped":
        return Markdown(f"**This step was skipped**: {reason}. Run what it names first, then this notebook again.")
    advice = getattr(STAGE[result.stage].part("run"), "next_step", None)
    return Markdown(advice(result, run) if advice is not None else f"Open {after(result)}.")


def after(result: StageResult[Any]) -> str:
    """The notebook to open after this stage's, in bold (the stage order of neuronkit/data/stages.toml)."""
    return f"**{notebook_after(result.stage)}**"


def dependents(stage: str) -> str:
    """The numbers of the notebooks whose stages need `stage`: `04 and 05`."""
    numbers = [s.number for s in WORKBOOK if stage in s.requires]
    return " and ".join([", ".join(numbers[:-1]), numbers[-1]] if len(numbers) > 1 else numbers)


def op_list(names: list[str]) -> str:
    """Op names in code style, comma-separated."""
    return ", ".join(f"`{name}`" for name in names)
