"""Adding a stage is one folder, one table row and one notebook (issue 38): a stage written here, in a folder
of its own outside the package, with a row in a stage table of its own (NEURONKIT_STAGES) and a notebook, is
run by the runner, shown by the report (its card, its key number, its place in the verdict) and checked by
`check()`, with no other edit. Run in a process of its own, which reads that table when it starts."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT

pytestmark = pytest.mark.subprocess

# The stage's folder: its options, its record types, its `neuronkit check` step, its run and its report
# number (no advice: its notebook's "Next" points to the notebook after it).
FOLDER = {
    "__init__.py": '''
        """A stage of a team's own: the model's tensors and parameters, counted."""

        from dataclasses import dataclass


        @dataclass(frozen=True)
        class CountOptions:
            smallest: int = 1  # tensors with fewer elements are not counted
    ''',
    "evidence.py": '''
        from dataclasses import dataclass

        from neuronkit.evidence import fact


        @dataclass
        class Count:
            """The model's tensors and parameters."""

            tensors: int = fact("Tensors", "count", default=0)
            parameters: int = fact("Parameters", "count", default=0)
    ''',
    "steps.py": '''
        from neuronkit.pipeline.check import CheckRun

        from tensor_count import CountOptions


        def run_count(run: CheckRun, record) -> tuple[str, str]:
            smallest = run.config.of(CountOptions).smallest
            counted = [p.numel() for p in run.session.model.parameters() if p.numel() >= smallest]
            record.tensors, record.parameters = len(counted), sum(counted)
            return "pass", f"{record.tensors} tensors, {record.parameters:,} parameters"
    ''',
    "run.py": '''
        from neuronkit.pipeline.check import check
        from neuronkit.pipeline.execute import run_stage
        from neuronkit.pipeline.session import load


        def run(params, **options):
            def body(params, rec):
                report = check(load(params), ["count"], params.config)
                rec.evidence = report.stage("count").evidence
                rec.status, rec.summary = report.verdict(["count"])

            return run_stage("tensor_count", params, options, body)
    ''',
    "report.py": '''
        from neuronkit.reporting.model import KeyNumber


        def key_numbers(run):
            count = run.evidence("tensor_count")
            return [KeyNumber("Tensors", str(count.tensors), "counted", count.tensors, "tensors")] if count else []
    ''',
}

TABLE = '''
report_notebook = "06_report"

[[stage]]
name = "tensor_count"
notebook = "01_tensor_count"
title = "Tensor count"
module = "tensor_count"
options = "CountOptions"
evidence = "Count"
steps = ["count"]
runs_model = true
checked = ["tensors"]

[[step]]
name = "count"
evidence = "Count"
'''

NOTEBOOK = [  # (tags, source)
    (["parameters"], 'model: str = "tiny-qwen3"\nrun_dir: str = "runs/x"\ndtype: str = "float32"\nseq_len: int = 16\n'
                     'batch_size: int = 1\nlayers: int = 0\nfull_model: bool = False\nsmallest: int = 1'),
    ([], "from neuronkit.workbook import display, lesson, parameters\nfrom tensor_count import run as tensor_count\n\n"
         "params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size,\n"
         "                    layers=layers, full_model=full_model)"),
    (["stage"], "result = tensor_count.run(params, smallest=smallest)"),
    ([], "lesson.next_step(result)"),
    ([], "print(display.summary(result))"),
]

# In that process: the workbook (the new stage's notebook, then the report's), then `check()` with the step.
SCRIPT = '''
import json
from neuronkit import check
from neuronkit.workbook import Execution, run_workbook

run_dir, notebooks = {run_dir!r}, {notebooks!r}
result = run_workbook("tiny-qwen3", run_dir, execution=Execution(kernels="cold", notebooks=notebooks),
                      smallest=100, log=lambda line: None)
report = check("tiny-qwen3", stages=["count"])
print(json.dumps({{"ok": result.ok, "notebooks": [nb.notebook for nb in result.notebooks],
                   "check": [[s.stage, s.status, s.summary] for s in report.stages]}}))
'''


def _stage(tmp_path: Path) -> dict[str, str]:
    """The stage's folder, table and notebooks (the new one, and the package's report notebook) under
    `tmp_path`, and the environment that names them: the table, the folder on the path, and a kernel that
    starts as torchrun's ranks do in these tests (forked from the rank server, or a fresh interpreter)."""
    folder = tmp_path / "code" / "tensor_count"
    folder.mkdir(parents=True)
    for name, text in FOLDER.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    (tmp_path / "stages.toml").write_text(TABLE)
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "neuronkit", "display_name": "neuronkit",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell(source, metadata={"tags": tags}) for tags, source in NOTEBOOK]
    nbformat.write(nb, notebooks / "01_tensor_count.ipynb")
    (notebooks / "06_report.ipynb").write_bytes((ROOT / "notebooks" / "06_report.ipynb").read_bytes())
    kernel = tmp_path / "jupyter" / "kernels" / "neuronkit"
    kernel.mkdir(parents=True)
    python = os.environ.get("PYTHON_EXEC", sys.executable)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [python, "-u", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "neuronkit", "language": "python"}))
    path = os.pathsep.join(p for p in (str(tmp_path / "code"), os.environ.get("PYTHONPATH")) if p)
    return {"NEURONKIT_STAGES": str(tmp_path / "stages.toml"), "PYTHONPATH": path,
            "JUPYTER_PATH": str(tmp_path / "jupyter")}


def test_a_stage_of_ones_own_is_run_reported_and_checked_with_no_other_edit(tmp_path: Path, forked_python) -> None:
    env = _stage(tmp_path)
    run_dir = tmp_path / "run"
    proc = forked_python(SCRIPT.format(run_dir=str(run_dir), notebooks=str(tmp_path / "notebooks")), env=env)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["ok"] and out["notebooks"] == ["01_tensor_count.ipynb", "06_report.ipynb"], proc.stdout
    # check(): the table's only step, its options from the run configuration's defaults (smallest=1)
    (step,) = out["check"]
    assert step[:2] == ["count", "pass"] and step[2].endswith("parameters")
    # the runner: the stage's notebook ran and recorded it, with the option the run was given (smallest=100)
    record = json.loads((run_dir / "stages" / "01_tensor_count.json").read_text())
    assert record["status"] == "pass" and record["evidence"]["tensors"] > 0
    assert record["evidence"]["parameters"] < int(step[2].split()[2].replace(",", ""))  # the norms left out
    # the report: its card with its title, its key number, a verdict over it
    report = json.loads((run_dir / "report.json").read_text())
    assert report["stages"]["tensor_count"]["title"] == "Tensor count" and report["verdict"] == "ready"
    tile = next(k for k in report["key_numbers"] if k["label"] == "Tensors")
    assert tile["number"] == record["evidence"]["tensors"]
    executed = nbformat.read(run_dir / "artifacts" / "notebooks" / "01_tensor_count.ipynb", as_version=4)
    shown = json.dumps([cell.outputs for cell in executed.cells if cell.cell_type == "code"])
    assert "Open **06_report**" in shown and "tensor_count: pass" in shown  # no advice: the next notebook
