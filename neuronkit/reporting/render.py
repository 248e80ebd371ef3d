"""Render the report model to one self-contained HTML page (jinja2, autoescape on, CSS/JS inlined)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

import neuronkit
from neuronkit.reporting.charts import Chart
from neuronkit.evidence import AuditSummary
from neuronkit.reporting.evidence import block_fields, evidence_items
from neuronkit.policy import SEVERITIES
from neuronkit.reporting.model import ReportModel
from neuronkit.pipeline.record import StageResult
from neuronkit.units import format_duration

TEMPLATES = Path(__file__).resolve().parent / "templates"
EMBED_RECORDS_BYTES = 768 * 1024  # larger stage records stay in stages/*.json, out of the page
FINDING_ROWS = 50  # ops listed per finding category; the op table lists them all
VERDICT_MEANING = {
    "blocked": "The model cannot move to Trainium as it is: the blockers below must change first.",
    "incomplete": "The run directory does not hold the records needed to judge the migration.",
    "ready_with_cpu_fallbacks":
        "The model runs on neuron with parity; some work falls back to CPU or needs planning.",
    "ready_with_caveats": "The model runs on neuron with parity, its forward and training step natively; some "
                          "findings need planning.",
    "ready": "The model runs on neuron with parity against CPU, every audited op natively.",
}
# The line above everything else: whether the numbers below come from Trainium at all.
DEVICE_BANNERS = {
    "simulated": ("SIMULATED", "This run used neuronkit's simulated neuron device on the host CPU, not "
                  "Trainium: op support follows TorchNeuron's policy, and every timing is a host timing."),
    "real": ("REAL TRAINIUM", "This run used torch_neuronx on a Trainium device."),
    "none": ("NO NEURON DEVICE", "The run found neither torch_neuronx nor the simulator."),
    "unknown": ("DEVICE UNKNOWN", "No environment record: this report cannot say whether the run used "
                "Trainium or the simulator."),
}
STATUS_LEGEND = {
    "pass": "the stage's checks held",
    "warn": "ran, with something to plan for",
    "fail": "ran, and a check did not hold",
    "error": "the stage crashed (traceback shown)",
    "skipped": "not run because an earlier stage failed",
    "missing": "no record in the run directory",
}
SEVERITY_LEGEND = {
    "blocker": "not supported on Neuron: must change before migrating",
    "warn": "runs, at a cost (CPU round trip, recompiles, emulated dtype)",
    "info": "runs; worth knowing",
    "ok": "runs natively",
}


# A stage status's colour where no page CSS is loaded (a notebook cell).
STATUS_COLOURS = {"pass": "#1a7f37", "warn": "#9a6700", "fail": "#cf222e", "error": "#cf222e", "skipped": "#6e7781"}


@functools.cache
def _environment() -> jinja2.Environment:
    """The templates' environment: autoescape on, undefined names are errors."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["duration"] = _duration
    env.filters["plain"] = _plain
    env.filters["op"] = op_name
    return env


def render_card(record: StageResult) -> str:
    """A stage record as an HTML card for a notebook cell, its evidence laid out as in the report."""
    return _environment().get_template("stage_card.html.j2").render(
        stage=record.stage, status=record.status, summary=record.summary, error=record.error,
        colour=STATUS_COLOURS.get(record.status, STATUS_COLOURS["skipped"]),
        items=evidence_items(record.stage, record.evidence))


def render_html(model: ReportModel, charts: list[Chart], distributed: dict[str, Any] | None = None,
                script: dict[str, Any] | None = None, cost: dict[str, Any] | None = None,
                compat: dict[str, Any] | None = None) -> str:
    """The report page, with the scale-out card when `distributed` (notebook 07's record) is given, the
    "Your script" section when `script` (script.json) is, and "What it will cost" when `cost`
    (neuronkit.reporting.cost) is, and "Public PyTorch APIs" when `compat` (the audit's, in AWS's compatibility
    vocabulary: neuronkit.stages.audit.report) is. Every model string is escaped by jinja2; the data JSON is embedded inert."""
    template = _environment().get_template("report.html.j2")
    return template.render(
        m=model,
        banner=dict(zip(("label", "text"), DEVICE_BANNERS.get(model.device, DEVICE_BANNERS["unknown"]))),
        charts=charts,
        verdict_meaning=VERDICT_MEANING[model.verdict],
        audit_fields=_audit_fields(model.audit_summary or {}),
        severity_rank={severity: rank for rank, severity in enumerate(SEVERITIES)},
        categories=sorted({row.category for row in model.ops}),
        status_legend=STATUS_LEGEND,
        severity_legend={s: SEVERITY_LEGEND[s] for s in SEVERITIES},
        data_json=embedded_json(_embedded(model)),
        finding_rows=FINDING_ROWS,
        version=neuronkit.__version__,
        distributed=distributed,
        script=script,
        cost=cost,
        compat=compat,
        zip=zip,
    )


def _embedded(model: ReportModel) -> dict[str, Any]:
    """The page's data: report.json plus the raw stage records, unless they would bloat the page."""
    size = len(json.dumps(model.records, default=str))
    if size <= EMBED_RECORDS_BYTES:
        return {"report": model.to_json(), "records": model.records}
    note = f"{size:,} bytes of stage records left out of the page; read them from {model.run_dir}/stages/"
    return {"report": model.to_json(), "records": None, "records_omitted": note}


def embedded_json(doc: Any) -> Markup:
    """JSON safe inside `<script type="application/json">`: `<`, `>` and `&` become \\u escapes, so no
    string in it can close the script element or open a comment."""
    text = json.dumps(doc, ensure_ascii=False, default=str)
    for char in "<>&\u2028\u2029":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return Markup(text)


def op_name(name: str) -> Markup:
    """An op name, escaped, that may wrap after `::`, `.` and `_` (never mid-word): `aten::<wbr>native_<wbr>…`."""
    text = str(escape(name))
    for mark in ("::", ".", "_"):
        text = text.replace(mark, mark + "\x00")
    return Markup(text.replace("\x00", "<wbr>"))


def _duration(seconds: float | None) -> str:
    return "" if seconds is None else format_duration(seconds)


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _audit_fields(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The audit summary as label/value pairs, labelled and formatted by `AuditSummary`'s fields."""
    return [(label, text) for label, text in block_fields(AuditSummary, summary)
            if text != "—"]
