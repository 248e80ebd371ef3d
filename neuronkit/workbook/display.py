"""What a notebook shows: a stage record as an HTML card with a plain-text twin, and evidence tables.

The card is the report's own stage card (the same Jinja macro lays out the evidence), so a notebook
and report.html show a record alike. Every output carries `text/plain` (and, for tables, `text/html`),
so papermill runs, nbval and HTML exports show the content without a live kernel. The nbval summary
lives in `neuronkit.workbook.nbval`, the JupyterLab widgets in `neuronkit.workbook.widgets`; both are
reachable from here, as the notebooks call them through `display`.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any, Iterable

from neuronkit.evidence import BucketPlan
from neuronkit.stages import STAGES, RunDir, StageResult
from neuronkit.workbook.nbval import summary
from neuronkit.workbook.widgets import command_picker, compare_widget, filter_widget

__all__ = ["buckets", "command_picker", "compare_widget", "comparison", "filter_widget", "report_link", "show",
           "summary", "table"]


class StageView:
    """A stage record in a notebook: status, summary and evidence, as HTML and as text."""

    def __init__(self, result: StageResult) -> None:
        self.result = result

    def _repr_html_(self) -> str:
        from neuronkit.reporting.render import render_card

        return render_card(self.result)

    def __repr__(self) -> str:
        from neuronkit.reporting.evidence import evidence_items

        r = self.result
        lines = [f"{r.stage}: {r.status} — {r.summary}"]
        for item in evidence_items(r.stage, r.evidence):
            lines.extend(_item_text(item))
        if r.error and r.status != "skipped":
            lines.append(r.error.rstrip())
        return "\n".join(lines)


def show(result: StageResult) -> StageView:
    """The card for a stage record (the last expression of a cell displays it)."""
    return StageView(result)


def table(rows: Iterable[dict[str, Any]], columns: list[str] | None = None) -> Any:
    """Rows of evidence as a pandas DataFrame (HTML and text in any notebook viewer)."""
    import pandas as pd

    frame = pd.DataFrame(list(rows))
    return frame[[c for c in columns if c in frame.columns]] if columns and not frame.empty else frame


def buckets(plan: BucketPlan | None) -> Any:
    """The bucket advice as a table: the recommended bucketing first, then the alternatives."""
    if plan is None:
        return table([])
    print(f"{len(plan.lengths)} prompts, {plan.distinct_shapes} distinct lengths: "
          f"{plan.distinct_shapes} compilations without buckets")
    columns = ["strategy", "buckets", "compilations", "padding_overhead"]
    rows = [{**{name: getattr(option, name) for name in columns}, "recommended": option is plan}
            for option in (plan, *plan.alternatives)]
    return table(rows, [*columns, "recommended"])


class _Link:
    """A file link for HTML viewers, its path as text elsewhere."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _repr_html_(self) -> str:
        href = html.escape(os.path.relpath(self.path))
        return f'<a href="{href}" target="_blank">{html.escape(self.path.name)}</a> ({html.escape(str(self.path))})'

    def __repr__(self) -> str:
        return str(self.path)


def report_link(path: str | Path) -> _Link:
    """A link to the rendered report (relative to the notebook, so JupyterLab opens it)."""
    return _Link(Path(path))


def comparison(run_dir: str | Path) -> Any:
    """One column per stage, one row per number the stages share: status, duration, step time, the
    largest parity error against the CPU reference (eager and compile) and the number of CPU-fallback
    ops each stage saw."""
    import pandas as pd

    records = {stage: record for stage, record in RunDir(run_dir).results().items() if record is not None}
    ev = {stage: record.recorded for stage, record in records.items()}
    baseline, eager, audit, compiled, profile = (ev.get(stage) for stage in
                                                 ("cpu_baseline", "eager", "audit", "compile", "profile"))
    rows = {
        "status": {stage: record.status for stage, record in records.items()},
        "duration (s)": {stage: _round(record.duration_s) for stage, record in records.items()},
        "step time (ms)": {"cpu_baseline": _round(baseline.forward_ms) if baseline else None,
                           "eager": _round(compiled.eager_step_ms) if compiled else None,
                           "compile": _round(compiled.compiled_step_ms) if compiled else None},
        "max abs error vs CPU": {stage: record.parity.largest_abs_err()
                                 for stage, record in (("eager", eager), ("compile", compiled)) if record},
        "CPU-fallback ops": {"eager": len(eager.fallback_ops) if eager else None,
                             "audit": len(audit.summary.fallbacks) if audit else None,
                             "compile": len(compiled.fallback_ops) if compiled else None,
                             "profile": len(profile.fallbacks) if profile else None},
    }
    frame = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=list(STAGES)).astype(object)
    return frame.where(frame.notna(), "—")


def _round(value: Any) -> Any:
    return round(value, 2) if isinstance(value, float) else value


def _item_text(item: Any) -> list[str]:
    lines = [f"  {item.label}:"] if item.label else []
    if item.kind == "table":
        lines.append("    " + " | ".join(item.columns))
        lines.extend("    " + " | ".join(row) for row in item.rows)
        if item.more_rows:
            lines.append(f"    … {item.more_rows:,} more rows")
    else:
        lines.extend(f"    {k}: {v}" for k, v in item.fields)
    return lines
