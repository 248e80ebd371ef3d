"""The report's "Public PyTorch APIs" block, fed by the audit stage's record: a tiny model's calls in AWS's
compatibility-table vocabulary in report.html (escaped) and report.json's `compat`."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from neuronkit.op_audit import audit
from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.reporting import report

EVIL = "</script><img src=x onerror=alert(1)>"


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.roll(self.lin(x), 1, 0)


def _run(path: Path, evidence: object) -> Path:
    run = RunDir(path)
    run.write(StageResult("audit", "warn", "1 fallback", evidence))
    run.write_params({"model": "tiny", "dtype": "float32"})
    return path


def test_the_report_lists_a_tiny_models_public_apis(tmp_path: Path) -> None:
    evidence = audit(Tiny(), torch.randn(2, 4)).evidence()
    evidence.apis[0].how += EVIL  # a hostile string from the record must stay text
    paths = report(_run(tmp_path, evidence))
    html = paths.html.read_text(encoding="utf-8")
    doc = json.loads(paths.json.read_text(encoding="utf-8"))
    section = html[html.index('<section id="compat"'):html.index("</section>", html.index('<section id="compat"'))]
    assert "torch.roll" in section and "CPU_FALLBACK" in section and "float32" in section
    assert "torch.nn.functional.linear</code></td><td>Y</td><td>Native</td>" in section
    assert EVIL not in html and "&lt;/script&gt;&lt;img" in section
    apis = {f"{a['namespace']}.{a['api']}": a for a in doc["compat"]["apis"]}
    assert apis["torch.roll"]["status"] == "CPU_FALLBACK" and apis["torch.roll"]["aten_ops"] == ["aten::roll"]
    assert doc["compat"]["counts"] == {"Y": 1, "CPU_FALLBACK": 1, "N": 0, "unknown": 0}
    assert doc["schema_version"] == 5


def test_an_audit_record_without_apis_says_so(tmp_path: Path) -> None:
    evidence = audit(Tiny(), torch.randn(2, 4)).evidence()
    evidence.apis = []
    paths = report(_run(tmp_path, evidence))
    assert "rerun the audit stage" in json.loads(paths.json.read_text())["compat"]["unavailable"]
    assert 'id="compat-unavailable"' in paths.html.read_text(encoding="utf-8")
