"""`neuronkit run MODEL --script train.py`: the "Your script" record (script.json, a `ScriptEvidence`), its
section in report.html and its key in report.json, and the script checked before any kernel starts."""

from __future__ import annotations

import json
from pathlib import Path

from test_report import full_run, render

from neuronkit.cli import main
from neuronkit.evidence import ScriptEvidence, specs
from neuronkit.port import record
from neuronkit.port.run import RunResult
from neuronkit.port.scan import scan_paths, scan_project
from neuronkit.resources import data_dir

EXAMPLE = data_dir() / "examples" / "train_cuda.py"


def _rank(**changes) -> dict:
    """One rank's record as neuronkit.port.bootstrap writes it."""
    rank = {"process": "rank0", "rank": 0, "status": "stopped", "error": None, "error_line": None, "exit_code": 0,
            "script_s": 2.5, "steps": 5, "losses": [2.5, 2.25, 2.0, 1.75, 1.5], "device_ops": 12,
            "fallback_ops": ["aten::cumprod"],
            "fallback_sites": [{"op": "aten::cumprod", "line": 61, "count": 2}],
            "peak_memory": {"neuron:0": 12 * 2**20}, "neff": {"misses": 40, "hits": 400, "disk_hits": 0}}
    return {**rank, **changes}


def test_the_report_shows_your_script_and_report_json_carries_it(tmp_path):
    run_dir = full_run(tmp_path / "run")
    (scan,) = scan_paths([EXAMPLE])
    result = RunResult(str(EXAMPLE), nproc=1, steps_asked=5, wall_s=9.5, returncode=0, ranks=[_rank()])
    record.write(run_dir, record.build(scan, result))
    html, doc, _ = render(run_dir)
    section = html[html.index('<section id="your-script">'):]
    section = section[:section.index("</section>")]
    assert "Your script" in section and "12 rewrite (12 fixed by the rewrite), 4 decide, 0 blocker" in section
    assert "torch.backends.cudnn.benchmark" in section and "torch-neuron-module.html" in section
    assert "+        torch.neuron.synchronize()" in section  # the diff
    assert "aten::<wbr>cumprod" in section and "(line 61)" in section and "12.0 MiB" in section
    assert "5/5 optimizer steps" in section and "2.5, 2.25, 2.0, 1.75, 1.5" in section
    script = doc["script"]
    assert script["verdict"] == "ready" and script["counts"]["rewrite"] == 12
    assert set(script) == {s.name for s in specs(ScriptEvidence)}
    assert script["run"]["fallbacks"] == [{"op": "aten::cumprod", "lines": [61]}]
    nccl = next(f for f in script["findings"] if f["rule"] == "nccl-backend")
    assert (nccl["line"], nccl["category"], nccl["fixed_by_write"]) == (39, "rewrite", True)


def test_a_failed_script_run_makes_its_section_blocked(tmp_path):
    run_dir = full_run(tmp_path / "run")
    (scan,) = scan_paths([EXAMPLE])
    crash = _rank(status="crashed", exit_code=1, steps=0, error="RuntimeError: boom", error_line=62)
    result = RunResult(str(EXAMPLE), nproc=1, steps_asked=5, wall_s=3.0, returncode=1, ranks=[crash])
    result.error, result.error_line = crash["error"], crash["error_line"]
    record.write(run_dir, record.build(scan, result))
    html, doc, _ = render(run_dir)
    assert doc["script"]["verdict"] == "blocked" and doc["script"]["run"]["ok"] is False
    assert "line 62: RuntimeError: boom" in html
    assert doc["verdict"] == json.loads((run_dir / "report.json").read_text())["verdict"] != "blocked"


def test_a_malformed_script_record_is_ignored(tmp_path):
    run_dir = full_run(tmp_path / "run")
    (run_dir / record.RECORD).write_text("{not json")
    html, doc, _ = render(run_dir)
    assert "script" not in doc and 'id="your-script"' not in html


def test_run_checks_the_script_before_any_kernel_starts(tmp_path, capsys):
    bad = tmp_path / "train.py"
    bad.write_text("def broken(:\n")
    assert main(["run", "tiny-qwen3", "--out", str(tmp_path / "out"), "--script", str(bad)]) == 2
    assert main(["run", "tiny-qwen3", "--out", str(tmp_path / "out"), "--script", str(tmp_path / "none.py")]) == 2
    assert main(["run", "tiny-qwen3", "--out", str(tmp_path / "out"), "--script-args", "--lr 1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and f"{bad}:1:" in err[0] and "no such file" in err[1] and "needs --script" in err[2]
    assert not Path(tmp_path / "out").exists()
    script, module = tmp_path / "imports.py", tmp_path / "legacy.py"  # a module the script imports: the same
    script.write_text("import legacy\n")
    module.write_text("print 'py2'\n")
    assert main(["run", "tiny-qwen3", "--out", str(tmp_path / "out"), "--script", str(script)]) == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert f"{module}:1:1: not valid Python (" in err and f"imported by {script}" in err
    assert not Path(tmp_path / "out").exists()


_TRAINS_ON_THE_MODEL_PATH = """import sys, pathlib, torch
assert pathlib.Path(sys.argv[2], "config.json").is_file(), sys.argv
model = torch.nn.Linear(4, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(10):
    model(torch.ones(2, 4, device="cuda")).sum().backward()
    optimizer.step()
"""


def test_record_script_runs_it_with_the_runs_model_and_renders_the_section(tmp_path, capfd, monkeypatch):
    """The glue of `neuronkit run --script`: {model} is the run's checkpoint, the run stops after
    --script-steps, script.json and the report's section follow."""
    from conftest import RANK_ENV
    monkeypatch.setenv("OMP_NUM_THREADS", RANK_ENV["OMP_NUM_THREADS"])  # forked from the rank server (conftest)
    import argparse

    from conftest import TINY_QWEN3
    from neuronkit.port.workbook import record_script
    from neuronkit.pipeline.record import RunDir

    run_dir = full_run(tmp_path / "run")
    RunDir(run_dir).write_params({"model": str(TINY_QWEN3), "dtype": "float32"})
    script = tmp_path / "train.py"
    script.write_text(_TRAINS_ON_THE_MODEL_PATH)
    args = argparse.Namespace(model="unused", script_args="--model {model}", script_steps=3)
    assert record_script(scan_project([script]), args, run_dir) is True
    doc = json.loads((run_dir / "report.json").read_text())
    assert doc["script"]["run"]["ok"] and doc["script"]["run"]["steps"] == 3
    assert doc["script"]["counts"]["fixed_by_write"] == 2
    assert "your script: ready" in capfd.readouterr().out


def test_a_run_with_no_device_op_says_whether_the_script_stopped_or_kept_its_cpu_path():
    """A script that crashed before its first step ran no op anywhere: that is not "kept its CPU path"."""
    crashed = RunResult(str(EXAMPLE), nproc=1, steps_asked=5, wall_s=1.0, returncode=1,
                        ranks=[_rank(status="crashed", exit_code=1, steps=0, device_ops=0, error="KeyError: 'RANK'")])
    assert crashed.warnings == ["no op ran on the device: the script stopped before its first step"]
    on_cpu = RunResult(str(EXAMPLE), nproc=1, steps_asked=5, wall_s=1.0, returncode=0, ranks=[_rank(device_ops=0)])
    assert on_cpu.warnings[-1].startswith("no op ran on the device: the script kept its CPU path")
