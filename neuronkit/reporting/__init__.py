"""The migration report: one self-contained HTML page and a JSON twin, built from a run directory's records.

    from neuronkit import report
    paths = report("runs/gpt2")      # writes runs/gpt2/report.html and runs/gpt2/report.json
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from neuronkit.reporting.charts import render_charts
from neuronkit.reporting.model import ReportModel, build_model
from neuronkit.reporting.render import render_html
from neuronkit.stages import RunDir

__all__ = ["ReportModel", "ReportPaths", "build_model", "report"]


@dataclass(frozen=True)
class ReportPaths:
    """Where the report was written."""

    html: Path
    json: Path


def report(run_dir: str | Path, out_dir: str | Path | None = None) -> ReportPaths:
    """Render `report.html` and `report.json` for a run directory into `out_dir` (default: the run dir).

    Raises NeuronkitInputError when `run_dir` is missing or holds no stage records.
    """
    model = build_model(RunDir(run_dir))
    out = Path(out_dir) if out_dir is not None else Path(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = ReportPaths(out / "report.html", out / "report.json")
    paths.html.write_text(render_html(model, render_charts(model.charts, host_timing=model.device != "real")), encoding="utf-8")
    paths.json.write_text(json.dumps(model.to_json(), indent=2, default=str) + "\n", encoding="utf-8")
    return paths
