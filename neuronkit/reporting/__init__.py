"""The migration report: one self-contained HTML page and a JSON twin, built from a run directory's records.

    from neuronkit import report
    paths = report("runs/gpt2")      # writes runs/gpt2/report.html and runs/gpt2/report.json
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from neuronkit.reporting.model import ReportModel, build_model
from neuronkit.pipeline.record import REPORT_HTML, REPORT_JSON, RunDir

__all__ = ["ReportModel", "ReportPaths", "build_model", "report"]


@dataclass(frozen=True)
class ReportPaths:
    """Where the report was written, and what it says (`model`: the verdict, reasons, next steps and stage
    cards report.html and report.json show)."""

    html: Path
    json: Path
    model: ReportModel | None = field(default=None, compare=False)


def report(run_dir: str | Path, out_dir: str | Path | None = None) -> ReportPaths:
    """Render `report.html` and `report.json` for a run directory into `out_dir` (default: the run dir).

    Raises NeuronkitInputError when `run_dir` is missing or holds no stage records.
    """
    # Imported here: the charts need matplotlib and the script section libcst (seconds together), which
    # `neuronkit run` would otherwise import before it starts the kernels' fork server (reporting.cli).
    from neuronkit.distributed import record as distributed_record
    from neuronkit.port import record as script_record
    from neuronkit.reporting.charts import render_charts
    from neuronkit.reporting.cost import cost_section
    from neuronkit.reporting.render import render_html
    from neuronkit.stages.audit.report import compat_section

    model = build_model(RunDir(run_dir))
    out = Path(out_dir) if out_dir is not None else Path(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = ReportPaths(out / REPORT_HTML, out / REPORT_JSON, model)
    scale_out = distributed_record.read(run_dir)  # notebook 07's card, outside the stage model
    script = script_record.read(run_dir)  # `neuronkit run --script`'s section, outside the verdict
    cost = cost_section(run_dir, model.reproduce["params"])  # "What it will cost", outside the verdict
    compat = compat_section(RunDir(run_dir))  # the audit's public APIs in AWS's vocabulary
    charts = render_charts(model.charts, host_timing=model.device != "real")
    paths.html.write_text(render_html(model, charts, scale_out, script, cost, compat), encoding="utf-8")
    doc = {**model.to_json(), **({"distributed": scale_out} if scale_out else {}),
           **({"script": script} if script else {}),
           "cost": cost.get("record") or {"unavailable": cost["unavailable"]},
           **({"compat": compat} if compat else {})}
    paths.json.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    return paths
