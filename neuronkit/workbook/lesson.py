"""What a notebook shows a learner around a stage record: a few key numbers, the full record folded
away, a "Next" paragraph computed from what the step found, and widgets with a readable text twin.

Every object has an HTML (or Markdown) form and a plain-text twin, like `display`'s cards, so papermill
runs, text viewers and HTML exports show the same content; `<details>` folds without JavaScript.
"""

from __future__ import annotations

import html
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from neuronkit.pipeline import STAGE, WORKBOOK, notebook_after
from neuronkit.stages import RunDir, StageResult

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


# Each stage's "Next" paragraph, by stage (`_advises`); a stage without one points to the notebook after it.
Advice = Callable[[StageResult, "RunDir | None"], str]
_NEXT: dict[str, Advice] = {}


def _advises(stage: str) -> Callable[[Advice], Advice]:
    """Register the decorated function as `stage`'s "Next" paragraph."""
    def register(advice: Advice) -> Advice:
        _NEXT[stage] = advice
        return advice
    return register


def next_step(result: StageResult, run: RunDir | None = None) -> Markdown:
    """What to do after this stage, decided by what it found (status, fallbacks, blockers, breaks).

    `run` lets a stage refer to an earlier stage's record (the audit to the eager run's fallbacks)."""
    reason = result.summary.strip().rstrip(".")
    if result.status == "error":
        return Markdown(f"**This step errored**: {reason}. Fix that first (the traceback is in the folded record "
                        "above), then run this notebook again.")
    if result.status == "skipped":
        return Markdown(f"**This step was skipped**: {reason}. Run what it names first, then this notebook again.")
    advice = _NEXT.get(result.stage)
    return Markdown(advice(result, run) if advice else f"Open {_after(result)}.")


@_advises("environment")
def _environment(result: StageResult, run: RunDir | None) -> str:
    device, model = result.evidence.device, result.evidence.model
    if device.kind == "none":
        return ("**No `neuron` device in this process**: the later stages will be skipped. On a Trn2/Trn3 "
                "instance check `pip show torch-neuronx` and `neuron-ls`.")
    hbm, size = device.hbm_bytes_per_core, model.estimated_bytes
    if hbm and size and size > hbm:
        return (f"**The weights alone ({size / 2**30:.1f} GiB) exceed one core's HBM ({hbm / 2**30:.0f} GiB)**: "
                "plan tensor parallelism (notebook 07) or a smaller `dtype` before the later notebooks.")
    return (f"The model fits one core. Open {_after(result)}: it records what the model does on the CPU, "
            "the reference every later step is held to.")


@_advises("cpu_baseline")
def _cpu_baseline(result: StageResult, run: RunDir | None) -> str:
    if result.status == "fail":
        return "**The CPU reference is broken** (NaN or infinite values): fix the model on the CPU first."
    caveat = f" Note first: {result.summary.split('. ')[0]}." if result.status == "warn" else ""
    return (f"The reference is recorded.{caveat} Open {_after(result)}: the one-line move, "
            "`model.to(\"neuron\")`, held to this reference.")


@_advises("eager")
def _eager(result: StageResult, run: RunDir | None) -> str:
    if result.status == "fail":
        return ("**The device disagrees with the CPU**: the report will say *blocked*, and notebooks "
                f"{_dependents(result.stage)} skip. Start from the output with the largest error in the folded "
                f"record; {_after(result)} lists the ops each module issues.")
    phases = {phase: ops for phase, ops in result.evidence.fallback_ops_by_phase.items() if ops}
    if not phases:
        return (f"Every op ran on the device and the answers match. Open {_after(result)} to see the whole op "
                "inventory, including the backward pass and the optimizer step.")
    where = "; ".join(f"{phase}: {_ops(ops)}" for phase, ops in phases.items())
    only_generate = set(phases) == {"generate"}
    then = ("They all come from `generate()`, the decoding loop, not from the forward or training step; "
            f"open {_after(result)}: it audits forward, backward and the optimizer by default, and "
            "`generate()` too with `generate=True`." if only_generate else
            f"Open {_after(result)}: it names the module that issues each one, with a remedy.")
    return f"The answers match, with CPU fallbacks ({where}). {then}"


@_advises("audit")
def _audit(result: StageResult, run: RunDir | None) -> str:
    summary = result.evidence.summary
    blockers = [row.op for row in summary.blockers]
    fallbacks = [row.op for row in summary.fallbacks]
    if blockers:
        return (f"**{len(blockers)} blocker(s)**: {_ops(blockers)}. Change the model as each remedy says before "
                "migrating; the report will say *blocked*.")
    text = (f"{len(fallbacks)} op(s) fall back to the CPU: {_ops(fallbacks)}; each remedy says how to avoid "
            "the host round trip." if fallbacks else "Every audited op has a Neuron lowering.")
    earlier = run.read("eager") if run is not None else None
    by_phase = earlier.evidence.fallback_ops_by_phase if earlier is not None and earlier.evidence else {}
    missed = {phase: sorted(set(ops) - set(fallbacks)) for phase, ops in by_phase.items()}
    audited = result.evidence.model.phases
    eager = STAGE["eager"].number
    if missed.get("generate") and "generate" not in audited:
        text += (f" Notebook {eager} also saw {_ops(missed['generate'])} fall back inside `generate()`, which "
                 "this audit traces only with `generate=True`.")
    other = sorted({op for phase, ops in missed.items() if phase != "generate" for op in ops})
    if other:
        text += (f" Notebook {eager} saw {_ops(other)} fall back outside `generate()` where the audit did "
                 "not: the audit runs on other values (weightless), so check those ops' inputs.")
    return text + f" Open {_after(result)}: the same model as whole graphs instead of op by op."


@_advises("compile")
def _compile(result: StageResult, run: RunDir | None) -> str:
    record = result.evidence
    if result.status == "fail":
        return ("**The compiled model fails or disagrees with the CPU reference**: the folded record has the "
                f"stage that failed and why. Eager mode (notebook {STAGE['eager'].number}) still works for debugging.")
    steps = []
    if record.graph_breaks:
        steps.append(f"remove the {len(record.graph_breaks)} graph break(s) (each names its reason and source line)")
    plan = record.buckets
    if plan is not None and plan.distinct_shapes > plan.compilations:
        steps.append(f"pad inputs to the buckets {plan.buckets}: {plan.compilations} compilations instead of "
                     f"{plan.distinct_shapes}, for {plan.padding_overhead:.0f}% extra tokens")
    todo = ("Before serving: " + "; ".join(steps) + ". " if steps else "One graph, no breaks. ")
    return todo + f"Open {_after(result)} to see where the time goes, op by op."


@_advises("profile")
def _profile(result: StageResult, run: RunDir | None) -> str:
    record = result.evidence
    top = record.top_ops[0].name if record.top_ops else None
    names = [row.name for row in record.fallbacks]
    text = (f"Remove the CPU fallbacks first ({_ops(names)}): each copies its tensors to the host and back "
            "on every call. " if names else "")
    if top:
        text += f"The hottest op is `{top}`; on Trainium, confirm it with a real profile before optimising. "
    return text + f"Open {_after(result)} for the verdict across all stages."


def _after(result: StageResult) -> str:
    """The notebook to open after this stage's, in bold (the stage order of neuronkit/data/stages.toml)."""
    return f"**{notebook_after(result.stage)}**"


def _dependents(stage: str) -> str:
    """The numbers of the notebooks whose stages need `stage`: `04 and 05`."""
    numbers = [s.number for s in WORKBOOK if stage in s.requires]
    return " and ".join([", ".join(numbers[:-1]), numbers[-1]] if len(numbers) > 1 else numbers)


def _ops(names: list[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)
