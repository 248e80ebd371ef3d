"""The nbval contract: the deterministic lines each notebook's last cell shows for
`# NBVAL_CHECK_OUTPUT` (tests/nbval/expected_outputs.json records them).

Only facts that depend on the model and the parameters, never on timings, paths or the machine. The cell is
test plumbing: `checked` shows the lines to nbval and nothing to the learner.
"""

from __future__ import annotations

from dataclasses import is_dataclass
from typing import Any

from neuronkit.pipeline.record import StageResult
from neuronkit.pipeline.stage import STAGE

# Rows of a table printed for nbval keep STABLE_KEYS (the paths printed per stage: `Stage.checked`).
STABLE_KEYS = ("name", "op", "category", "calls", "shape", "ok", "reason", "bytes_copied")
_MISSING = object()


def summary(result: StageResult[Any]) -> str:
    """The deterministic lines the `# NBVAL_CHECK_OUTPUT` cell shows: status and the checked facts."""
    lines = [f"{result.stage}: {result.status}"]
    if result.status == "skipped":
        lines.append(f"  reason: {result.error}")
    for path in STAGE[result.stage].checked:
        value = _lookup(result.evidence, path)
        if value is not _MISSING:
            lines.append(f"  {path}: {_stable(value)}")
    return "\n".join(lines)


def checked(text: str) -> None:
    """Display `text` for nbval and nothing in JupyterLab: one display output whose `text/plain` (what nbval
    compares) is `text` and whose `text/html`, which JupyterLab renders in its place, is empty. The cell's
    source is hidden by its metadata; its output cannot be folded the same way, as JupyterLab unfolds a cell's
    outputs whenever it runs it (and saving then drops `outputs_hidden` from the notebook and its .py)."""
    from IPython.display import display

    display({"text/plain": text, "text/html": ""}, raw=True)


def _lookup(record: Any, path: str) -> Any:
    """The value at a dotted attribute path of a typed record; _MISSING where a step is None or absent."""
    for name in path.split("."):
        if record is None or not hasattr(record, name):
            return _MISSING
        record = getattr(record, name)
    return record


def _stable(value: Any) -> str:
    """A value printed so that float noise below three significant digits does not show; a table's rows
    keep STABLE_KEYS."""
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, list):
        rows = [{k: getattr(v, k) for k in STABLE_KEYS if hasattr(v, k)} if is_dataclass(v) else v for v in value]
        return "[" + ", ".join(_stable(v) for v in rows) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_stable(v)}" for k, v in value.items()) + "}"
    return repr(value) if isinstance(value, str) else str(value)
