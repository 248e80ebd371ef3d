"""What a notebook shows: a stage record as an HTML card with a plain-text twin, and evidence tables.

The card is the report's own stage card (the same Jinja macro lays out the evidence), so a notebook
and report.html show a record alike. Every output carries `text/plain` (and, for tables, `text/html`),
so papermill runs, nbval and HTML exports show the content without a live kernel. The nbval summary
lives in `neuronkit.workbook.nbval`, the JupyterLab widgets in `neuronkit.workbook.widgets`; both are
reachable from here, as the notebooks call them through `display`.
"""

from __future__ import annotations

import functools
import html
import os
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, Iterable

from neuronkit import timing
from neuronkit.evidence import BucketPlan, specs
from neuronkit.pipeline.record import STAGES, RunDir, StageResult
from neuronkit.reporting.evidence import evidence_items, format_value
from neuronkit.units import format_duration, format_ms
from neuronkit.workbook.nbval import checked, summary
from neuronkit.workbook.widgets import command_picker, compare_widget, filter_widget

__all__ = ["buckets", "checked", "command_picker", "compare_widget", "comparison", "filter_widget", "report_link",
           "show", "summary", "table"]


class StageView:
    """A stage record in a notebook: status, summary and evidence, as HTML and as text."""

    def __init__(self, result: StageResult) -> None:
        self.result = result

    def _repr_html_(self) -> str:
        from neuronkit.reporting.render import render_card

        return render_card(self.result)

    def __repr__(self) -> str:
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


def table(rows: Iterable[Any], columns: list[str] | None = None) -> Any:
    """Rows of evidence (dicts or records) as a pandas DataFrame whose cells wrap instead of being cut
    (remedies, module paths), in HTML and in text; a record's durations are rounded, with their unit."""
    import pandas as pd

    frame = _wrapping(pd)(pd.DataFrame([_row(r) for r in rows]))
    return frame[[c for c in columns if c in frame.columns]] if columns and not frame.empty else frame


def _row(row: Any) -> Any:
    """A record as a dict, each duration field (by its unit) as text such as `4.68 ms`; a dict as it is."""
    if not is_dataclass(row):
        return row
    data = asdict(row)
    for spec in specs(type(row)):
        if spec.unit in ("s", "ms", "µs") and isinstance(data.get(spec.name), (int, float)):
            data[spec.name] = format_value(data[spec.name], spec.unit)
    return data


@functools.cache
def _wrapping(pd: Any) -> type:
    """A DataFrame that shows every cell in full: pandas cuts a cell at `display.max_colwidth` (50
    characters) with "..."; this one lifts that limit for its own display only and lets HTML cells wrap."""

    class WrappingFrame(pd.DataFrame):
        @property
        def _constructor(self) -> type:
            return WrappingFrame

        def _repr_html_(self) -> str:
            with pd.option_context("display.max_colwidth", None):
                body = self.to_html(classes=_WRAP_CLASS, notebook=True, max_rows=pd.get_option("display.max_rows"),
                                    max_cols=pd.get_option("display.max_columns"), show_dimensions="truncate")
            return _WRAP_STYLE + body

        def __repr__(self) -> str:
            # every column and cell in full, whatever terminal size pandas would detect (none under papermill)
            with pd.option_context("display.max_colwidth", None, "display.width", None, "display.max_columns", None):
                return super().__repr__()

    return WrappingFrame


_WRAP_CLASS = "neuronkit-wrap"  # scopes the style below to these tables, not every DataFrame on the page
_WRAP_STYLE = (f"<style>table.{_WRAP_CLASS} td {{ white-space: normal; overflow-wrap: anywhere; text-align: left; "
               "max-width: 40em; }</style>")


def buckets(plan: BucketPlan | None) -> Any:
    """The bucket advice as a table: the recommended bucketing first, then the alternatives."""
    if plan is None:
        return table([])
    print(f"From {plan.source or 'the prompts measured'}: {len(plan.lengths)} prompts, {plan.distinct_shapes} "
          f"distinct lengths: {plan.distinct_shapes} compilations without buckets")
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
    """One column per stage, one row per number the stages share: status, duration, forward time, the
    largest parity error against the CPU reference (eager and compile) and the number of CPU-fallback
    ops each stage saw. Times are rounded with their unit; the eager column's forward is the run's one
    forward time (the compile stage measures it, interleaved with the compiled forward)."""
    import pandas as pd

    records = {stage: record for stage, record in RunDir(run_dir).results().items() if record is not None}
    ev = {stage: record.recorded for stage, record in records.items()}
    baseline, eager, audit, compiled, profile = (ev.get(stage) for stage in
                                                 ("cpu_baseline", "eager", "audit", "compile", "profile"))
    host = " (host)" if _host_timing(records) else ""
    rows = {
        "status": {stage: record.status for stage, record in records.items()},
        f"stage duration{host}": {stage: format_duration(record.duration_s) for stage, record in records.items()},
        f"forward, median{host}": {"cpu_baseline": format_ms(baseline.forward_ms) if baseline else None,
                                   "eager": format_ms(compiled.eager_step_ms) if compiled else None,
                                   "compile": format_ms(compiled.compiled_step_ms) if compiled else None},
        "forward on trn2 (roofline estimate)": {"profile": _estimate(profile)},
        "max abs error vs CPU": {stage: format_value(record.parity.largest_abs_err(), "error")
                                 for stage, record in (("eager", eager), ("compile", compiled)) if record},
        "CPU-fallback ops": {"eager": len(eager.fallback_ops) if eager else None,
                             "audit": len(audit.summary.fallbacks) if audit else None,
                             "compile": len(compiled.fallback_ops) if compiled else None,
                             "profile": len(profile.fallbacks) if profile else None},
    }
    frame = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=list(STAGES)).astype(object)
    return frame.where(frame.notna(), "—")


def _host_timing(records: dict[str, StageResult]) -> bool:
    """Whether the run's times are host timings: the environment record's device, else this process's."""
    environment = records.get("environment")
    kind = getattr(getattr(environment.recorded, "device", None), "kind", "") if environment else ""
    return kind != "real" if kind else timing.clock() == "host"


def _estimate(profile: Any) -> str | None:
    """The profile's roofline estimate of one forward on trn2 (its row says it is an estimate)."""
    us = getattr(profile, "est_trn2_step_us", None)
    return None if us is None else format_duration(us / 1e6)


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
