"""What a notebook shows: a stage record as an HTML card with a plain-text twin, tables, a deterministic
summary for nbval, and ipywidgets that always come after a static rendering.

Evidence is laid out by the report's `evidence_items`, so a notebook and report.html show a record alike.

Every output carries `text/plain` (and, for tables, `text/html`), so papermill runs, nbval and HTML
exports show the content without a live kernel; the widgets are an extra for people in JupyterLab.
"""

from __future__ import annotations

import html
import os
import shlex
from pathlib import Path
from typing import Any, Iterable

from neuronkit.stages import STAGES, RunDir, StageResult
from neuronkit.workbook.params import DTYPES, Params

_COLOURS = {"pass": "#1a7f37", "warn": "#9a6700", "fail": "#cf222e", "error": "#cf222e", "skipped": "#6e7781"}

# Evidence the final cell of each notebook prints for `# NBVAL_CHECK_OUTPUT`: facts that depend only on
# the model and the parameters, never on timings, paths or the machine. Rows of a table keep STABLE_KEYS.
CHECKED: dict[str, tuple[str, ...]] = {
    "environment": ("device.kind", "model.name", "model.architecture", "model.model_type",
                    "model.num_parameters", "model.dtype"),
    "cpu_baseline": ("logits_shape", "loss", "generate.text", "fill_mask.text"),
    "eager": ("parity.outputs", "parity.top1_agreement", "parity.generate_identical", "training.ok",
              "fallback_ops"),
    "audit": ("summary.distinct_ops", "summary.support_pct_ops", "summary.by_category", "summary.blockers"),
    "compile": ("graphs", "graph_breaks", "recompiles", "parity.outputs", "buckets.buckets",
                "buckets.compilations"),
    "profile": ("distinct_ops", "fallbacks"),
}
STABLE_KEYS = ("name", "op", "category", "calls", "shape", "ok", "reason", "bytes_copied")


class StageView:
    """A stage record in a notebook: status, summary and evidence, as HTML and as text."""

    def __init__(self, result: StageResult) -> None:
        self.result = result

    def _repr_html_(self) -> str:
        from neuronkit.report.evidence import evidence_items

        r = self.result
        colour = _COLOURS.get(r.status, "#6e7781")
        parts = [f'<div><b>{html.escape(r.stage)}</b> <span style="color:white;background:{colour};'
                 f'padding:1px 6px;border-radius:3px">{r.status}</span> {html.escape(r.summary)}</div>']
        for item in evidence_items(r.stage, r.evidence):
            parts.append(_item_html(item))
        if r.error and r.status != "skipped":  # a skipped record's summary is its reason
            parts.append(f"<details><summary>traceback</summary><pre>{html.escape(r.error)}</pre></details>")
        return "\n".join(parts)

    def __repr__(self) -> str:
        from neuronkit.report.evidence import evidence_items

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


def summary(result: StageResult) -> str:
    """The deterministic lines the `# NBVAL_CHECK_OUTPUT` cell prints: status and the checked facts."""
    lines = [f"{result.stage}: {result.status}"]
    if result.status == "skipped":
        lines.append(f"  reason: {result.error}")
    for path in CHECKED[result.stage]:
        value = _lookup(result.evidence, path)
        if value is not _MISSING:
            lines.append(f"  {path}: {_stable(value)}")
    return "\n".join(lines)


def table(rows: Iterable[dict[str, Any]], columns: list[str] | None = None) -> Any:
    """Rows of evidence as a pandas DataFrame (HTML and text in any notebook viewer)."""
    import pandas as pd

    frame = pd.DataFrame(list(rows))
    return frame[[c for c in columns if c in frame.columns]] if columns and not frame.empty else frame


def buckets(plan: dict[str, Any] | None) -> Any:
    """The bucket advice as a table: the recommended bucketing first, then the alternatives."""
    if not plan:
        return table([])
    print(f"{len(plan['lengths'])} prompts, {plan['distinct_shapes']} distinct lengths: "
          f"{plan['distinct_shapes']} compilations without buckets")
    recommended = {k: plan[k] for k in ("strategy", "buckets", "compilations", "padding_overhead")}
    return table([{**recommended, "recommended": True}, *plan.get("alternatives", [])],
                 ["strategy", "buckets", "compilations", "padding_overhead", "recommended"])


def filter_widget(frame: Any, by: list[str], text_column: str | None = None) -> Any:
    """Dropdowns over `by` columns (and a substring box over `text_column`) that filter `frame` live.

    Callers display `frame` itself first: the widget state is not rendered outside a live kernel. The
    filtered table is an HTML widget, not an `Output` widget: see `_html_pane`.
    """
    import ipywidgets as widgets

    controls: dict[str, Any] = {
        column: widgets.Dropdown(options=["(all)"] + sorted(map(str, frame[column].unique())), description=column)
        for column in by if column in frame.columns}
    if text_column and text_column in frame.columns:
        controls[text_column] = widgets.Text(description=text_column, placeholder="substring")
    output = widgets.HTML()

    def refresh(_: Any = None) -> None:
        shown = frame
        for column, control in controls.items():
            value = control.value
            if column == text_column and value:
                shown = shown[shown[column].astype(str).str.contains(value, regex=False)]
            elif column != text_column and value != "(all)":
                shown = shown[shown[column].astype(str) == value]
        output.value = _html_pane(shown)

    for control in controls.values():
        control.observe(refresh, names="value")
    refresh()
    return widgets.VBox([widgets.HBox(list(controls.values())), output])


def run_command(model: str, dtype: str, seq_len: int, batch_size: int) -> str:
    """The `neuronkit run` command for these parameters, run from the repository root."""
    return shlex.join(["neuronkit", "run", model, "--out", f"runs/{Path(model).name}", "--dtype", dtype,
                       "--seq-len", str(seq_len), "--batch-size", str(batch_size)])


def command_picker(params: Params) -> Any:
    """Print the command for `params`, and return a model/dtype picker that rebuilds it (JupyterLab)."""
    import ipywidgets as widgets

    from neuronkit.models import BUNDLED_MODELS

    print(run_command(params.model, params.dtype, params.seq_len, params.batch_size))
    model = widgets.Combobox(value=params.model, options=list(BUNDLED_MODELS), ensure_option=False,
                             description="model", placeholder="bundled name or checkpoint directory")
    dtype = widgets.Dropdown(options=list(DTYPES), value=params.dtype, description="dtype")
    shown = widgets.HTML()

    def refresh(_: Any = None) -> None:
        command = run_command(model.value or params.model, dtype.value, params.seq_len, params.batch_size)
        cell = f"model = {model.value or params.model!r}\ndtype = {dtype.value!r}"
        shown.value = (f"<p>Terminal:</p><pre>{html.escape(command)}</pre>"
                       f"<p>Or in each notebook's parameters cell:</p><pre>{html.escape(cell)}</pre>")

    model.observe(refresh, names="value")
    dtype.observe(refresh, names="value")
    refresh()
    return widgets.VBox([widgets.HBox([model, dtype]), shown])


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
    largest parity error against the stage's reference (eager: CPU; compile: eager) and the number of
    CPU-fallback ops each stage saw."""
    import pandas as pd

    records = {stage: record for stage, record in RunDir(run_dir).results().items() if record is not None}
    ev = {stage: record.evidence for stage, record in records.items()}
    rows = {
        "status": {stage: record.status for stage, record in records.items()},
        "duration (s)": {stage: _round(record.duration_s) for stage, record in records.items()},
        "step time (ms)": {"cpu_baseline": _round(ev.get("cpu_baseline", {}).get("forward_ms")),
                           "eager": _round(ev.get("compile", {}).get("eager_step_ms")),
                           "compile": _round(ev.get("compile", {}).get("compiled_step_ms"))},
        "max abs error vs reference": {stage: _max_err(ev.get(stage, {})) for stage in ("eager", "compile")},
        "CPU-fallback ops": {"eager": _count(ev.get("eager", {}).get("fallback_ops")),
                             "audit": _count(ev.get("audit", {}).get("summary", {}).get("fallbacks")),
                             "profile": _count(ev.get("profile", {}).get("fallbacks"))},
    }
    frame = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=list(STAGES)).astype(object)
    return frame.where(frame.notna(), "—")


def compare_widget(run_dir: str | Path) -> Any:
    """Two stage pickers showing the chosen records side by side (JupyterLab)."""
    import ipywidgets as widgets

    run = RunDir(run_dir)
    stages = [stage for stage, record in run.results().items() if record is not None]
    panes = []
    for default in stages[1:2] + stages[-1:]:
        picker = widgets.Dropdown(options=stages, value=default, description="stage")
        output = widgets.HTML()

        def refresh(_: Any = None, picker: Any = picker, output: Any = output) -> None:
            output.value = _html_pane(StageView(run.read(picker.value)))

        picker.observe(refresh, names="value")
        refresh()
        panes.append(widgets.VBox([picker, output], layout=widgets.Layout(width="50%")))
    return widgets.HBox(panes)


def _html_pane(shown: Any) -> str:
    """`shown`'s HTML for an `ipywidgets.HTML` pane.

    The widgets never use `ipywidgets.Output`: capturing output into one makes nbclient (papermill,
    nbval) send `comm_msg` updates on the kernel's shell socket from its IOPub handler while it is
    polling that socket for the cell's `execute_reply` (nbclient/output_widget.py `_publish_msg`). The
    zmq socket's edge-triggered wake-up is then lost, the reply sits unread and the cell "runs" until the
    cell timeout, forever without one: the stall seen at notebook 06's widget cell.
    """
    return shown._repr_html_()


def _round(value: Any) -> Any:
    return round(value, 2) if isinstance(value, float) else value


def _max_err(evidence: dict[str, Any]) -> float | None:
    errors = [o["max_abs_err"] for o in (evidence.get("parity") or {}).get("outputs", [])
              if isinstance(o.get("max_abs_err"), (int, float))]
    return max(errors) if errors else None


def _count(values: Any) -> int | None:
    return len(values) if isinstance(values, list) else None


_MISSING = object()


def _lookup(data: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(data, dict) or key not in data:
            return _MISSING
        data = data[key]
    return data


def _stable(value: Any) -> str:
    """A value printed so that float noise below three significant digits does not show."""
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, list):
        rows = [{k: v[k] for k in STABLE_KEYS if k in v} if isinstance(v, dict) else v for v in value]
        return "[" + ", ".join(_stable(v) for v in rows) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_stable(v)}" for k, v in value.items()) + "}"
    return repr(value) if isinstance(value, str) else str(value)


def _item_html(item: Any) -> str:
    title = f"<div><i>{html.escape(item.label)}</i></div>" if item.label else ""
    if item.kind == "table":
        head = "".join(f"<th>{html.escape(c)}</th>" for c in item.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in item.rows)
        more = f"<div>… {item.more_rows:,} more rows in the stage record</div>" if item.more_rows else ""
        return f"{title}<table><tr>{head}</tr>{body}</table>{more}"
    rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                   f"{html.escape(v)}</td></tr>" for k, v in item.fields)
    return f"{title}<table>{rows}</table>"


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
