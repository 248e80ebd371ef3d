"""`neuronkit port --run` as a user runs it: a project from its own layout (local modules rewritten, data found
beside the script), JSON that carries the run, a script that spawns its processes (observed, stopped, counted),
the op audit of the model a script builds, the findings at the line a run failed on, and nothing left behind (no
temporary folder, no process). The command runs in this process; the script in the process it starts."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import torch
from conftest import RANK_ENV, ROOT

from neuronkit.cli import main
from neuronkit.distributed.launch import free_port

PROJECTS = ROOT / "tests" / "port" / "corpus" / "projects"


@pytest.fixture(autouse=True)
def _forkable(monkeypatch):
    """The run's process forked from the session's rank server, which imported torch under RANK_ENV
    (conftest): a one-process run gets the process's environment, so it must match."""
    for name, value in RANK_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.mark.subprocess
def test_a_project_runs_from_its_own_layout_and_json_carries_the_run(monkeypatch, capfd):
    """The CUDA of package_project is in its trainer/ package and its configuration beside the script
    (found through __file__): both work in the copy; the script's output goes to stderr with `--json -`."""
    monkeypatch.chdir(PROJECTS / "package_project")
    assert main(["port", "train.py", "--run", "--steps", "3", "--nproc", "1", "--json", "-"]) == 0
    out, err = capfd.readouterr()
    doc = json.loads(out)
    run = doc["run"]
    assert run["ok"] and run["steps"] == 3 and run["nproc"] == 1 and len(run["losses"]) == 3
    assert doc["files"] == ["train.py", "trainer/__init__.py", "trainer/utils.py", "trainer/engine.py"]
    line = next(n for n, text in enumerate(Path("trainer/engine.py").read_text().splitlines(), 1) if "mse_loss(" in text)
    assert {"op": "aten::mse_loss.out", "lines": [], "elsewhere": [f"trainer/engine.py:{line}"]} in run["fallbacks"]
    assert "step 1 loss" in err and "run: train.py on the simulated device, 1 process: 3/3 optimizer steps" in err


_LEAVES_A_HELPER = """
import os, subprocess, sys
import torch

helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # never waited for
with open("out/helper.pid", "w") as fh:  # a folder of the project: the copy links it
    fh.write(str(helper.pid))


class Lookahead(torch.optim.Optimizer):
    # a wrapper optimizer: its step runs the inner optimizer's step
    def __init__(self, inner):
        self.inner = inner
        super().__init__(inner.param_groups, {})

    def step(self, closure=None):
        return self.inner.step(closure)


model = torch.nn.Linear(4, 1).cuda()
optimizer = Lookahead(torch.optim.SGD(model.parameters(), lr=0.1))
with open("amp_device.txt") as fh:
    scaler = torch.amp.GradScaler(fh.read())  # made for CUDA, read at run time
for step in range(10):
    for micro in range(2):  # gradient accumulation: a step's loss is the sum of its micro-batches'
        loss = model(torch.ones(2, 4, device="cuda")).sum() / 2
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
"""


@pytest.mark.subprocess
def test_a_run_leaves_no_temporary_folder_and_no_process_behind(tmp_path, monkeypatch, capfd):
    """A wrapper optimizer's steps count once; a GradScaler that disables itself is a warning."""
    script = tmp_path / "train.py"
    script.write_text(_LEAVES_A_HELPER)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    (tmp_path / "amp_device.txt").write_text("cuda")
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["port", str(script), "--run", "--steps", "3", "--json", "-"]) == 0
    out, err = capfd.readouterr()
    assert "1 process: 3/3 optimizer steps" in err and "-> ok" in err
    run = json.loads(out)["run"]
    assert len(run["losses"]) == 3  # one per step, of 6 backward calls
    assert run["warnings"] == ["a GradScaler for 'cuda' disabled itself (no such device here): float16 steps are "
                               "not loss-scaled"]
    assert [p.name for p in temp.iterdir() if p.name.startswith("neuronkit-port-")] == []
    pid = int((tmp_path / "out" / "helper.pid").read_text())
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")  # gone, or a corpse


_SKIPS_SCALED_STEPS = """
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
scaler = torch.cuda.amp.GradScaler(init_scale=2.0**18)  # float16 gradients overflow: the first steps are skipped
x, y = torch.randn(2, 8, 4).cuda(), torch.randn(2, 8, 1).cuda()
for step in range(20):
    total = 0.0
    for micro in range(2):  # gradient accumulation: the step's loss is the sum of both
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x[micro]).float(), y[micro]) / 2
        scaler.scale(loss).backward()
        total += loss.item()
    scale = scaler.get_scale()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
    print("skipped" if scaler.get_scale() < scale else f"stepped {total}")
"""


@pytest.mark.subprocess
def test_the_losses_of_a_step_a_grad_scaler_skipped_are_not_added_to_the_next(tmp_path, capfd):
    """A GradScaler skips the optimizer step of inf/NaN gradients: a step's loss is the sum of its own
    micro-batches', not of those of the skipped steps before it."""
    script = tmp_path / "amp.py"
    script.write_text(_SKIPS_SCALED_STEPS)
    assert main(["port", str(script), "--run", "--steps", "3", "--json", "-"]) == 0
    out, err = capfd.readouterr()
    steps = [line.split() for line in err.splitlines() if line.startswith(("skipped", "stepped"))]
    assert steps[0] == ["skipped"]  # the case
    taken = [float(words[1]) for words in steps if words[0] == "stepped"]  # the third stopped the run first
    losses = json.loads(out)["run"]["losses"]
    assert len(losses) == 3 and losses[:2] == pytest.approx(taken, rel=1e-5)


_REPLACES_ITS_SCALER = """
import torch

model = torch.nn.Linear(4, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
unused = torch.amp.GradScaler(device=open("amp_device.txt").read())  # as Lightning makes one, then its own
scaler = torch.amp.GradScaler("cuda")
for step in range(5):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(torch.ones(8, 4).cuda()).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
"""


@pytest.mark.subprocess
def test_a_grad_scaler_that_disabled_itself_and_is_never_used_is_no_warning(tmp_path, monkeypatch, capfd):
    """Lightning's "16-mixed" makes a MixedPrecision plugin for "cuda" (its scaler disables itself) and, on
    neuron, replaces it with the device's: only a disabled scaler the script scales or steps with leaves float16
    unscaled."""
    (tmp_path / "train.py").write_text(_REPLACES_ITS_SCALER)
    (tmp_path / "amp_device.txt").write_text("cuda")
    monkeypatch.chdir(tmp_path)
    assert main(["port", "train.py", "--run", "--steps", "2", "--json", "-"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["run"]["warnings"] == [], err


@pytest.mark.subprocess
def test_a_script_that_spawns_its_processes_has_them_observed_stopped_and_counted(monkeypatch, capfd):
    """mp.spawn's child is a real spawned interpreter, stopped after the steps and counted; `--nproc` is for
    scripts torchrun starts, so it is refused here. (Two children each, forked: tests/port/test_port_corpus.py.)"""
    monkeypatch.chdir(PROJECTS / "ddp_spawn")
    assert main(["port", "main.py", "--run", "--nproc", "2"]) == 2
    assert "starts its own processes" in capfd.readouterr().err
    assert main(["port", "main.py", "--run", "--steps", "3", "--", "--world-size", "1",
                 "--port", str(free_port()), "--steps", "50"]) == 0
    out = capfd.readouterr().out
    assert "1 process started by the script: 3/3 optimizer steps" in out and "-> ok" in out


_FACTORY_LSTM = """
import torch
from torch import nn

config = {"encoder": "LSTM", "hidden": 8}


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = getattr(nn, config["encoder"])(4, config["hidden"], batch_first=True)  # unseen by the scan
        self.head = nn.Linear(config["hidden"], 2)

    def forward(self, x):
        out, _ = self.encoder(x)
        return self.head(out[:, -1])


model = Tagger().to("cuda")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    loss = model(torch.ones(2, 3, 4, device="cuda")).sum()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.subprocess
def test_the_op_audit_of_the_model_the_script_builds_finds_what_the_scan_cannot(tmp_path, capfd):
    script = tmp_path / "tagger.py"
    script.write_text(_FACTORY_LSTM)
    assert main(["port", str(script), "--run", "--steps", "2"]) == 1
    out = capfd.readouterr().out
    assert "0 blockers) -> ready" in out  # the scan saw no LSTM
    assert "model blocker (op audit):" in out and "[fused_rnn] in encoder" in out and "-> FAILED" in out


@pytest.mark.subprocess
def test_the_findings_at_the_failing_line_come_with_the_error(tmp_path, capfd):
    script = tmp_path / "probe.py"
    script.write_text("import torch\nmajor, minor = torch.cuda.get_device_capability()\n")
    assert main(["port", str(script), "--run"]) == 1
    out = capfd.readouterr().out
    try:  # what this torch raises there: the CPU build's assertion, or a CUDA build's missing driver
        torch.cuda.get_device_capability()
        pytest.skip("this machine has a CUDA device")
    except (AssertionError, RuntimeError) as exc:
        raised = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    assert f"error: {script}:2: {raised}"[:200] in out
    assert "blocker hit: line 2 [get-device-capability]" in out  # the scan said the script raises there
    assert "took no optimizer step" not in out  # the error says why
    assert len([line for line in out.splitlines() if line.startswith("  error:")][0]) < 400


@pytest.mark.subprocess
def test_sigterm_stops_the_run_and_leaves_nothing_behind(tmp_path):
    """CI cancelling a job sends SIGTERM: the command stops its script's processes, removes its temporary
    folder and says so in one line (exit 1), as on Ctrl-C."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "hang.py").write_text("import os, time, torch\nx = torch.ones(2).cuda()\n"
                                      "open(os.environ['HANG_STARTED'], 'w').write(str(os.getpid()))\n"
                                      "while True:\n    time.sleep(0.1)\n")
    temp, started = tmp_path / "tmp", tmp_path / "started"
    temp.mkdir()
    env = {**os.environ, "HANG_STARTED": str(started), "TMPDIR": str(temp)}
    command = subprocess.Popen([sys.executable, "-m", "neuronkit.cli", "port", "hang.py", "--run", "--timeout", "300"],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not started.exists() and command.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert started.exists(), command.communicate()
    command.send_signal(signal.SIGTERM)
    _, err = command.communicate(timeout=30)
    assert command.returncode == 1
    assert err.strip().splitlines()[-1] == "neuronkit port: error: interrupted (SIGTERM): stopped before it finished"
    assert "Traceback" not in err and list(temp.iterdir()) == []
    script = Path(f"/proc/{started.read_text()}/stat")
    assert not script.exists() or script.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")


@pytest.mark.subprocess
def test_one_process_of_a_torchrun_script_runs_under_torchrun(tmp_path, monkeypatch, capfd):
    """A script written for torchrun reads its rank from the environment; `--nproc 1` still starts it under
    torchrun (one rank), as `torchrun --nproc-per-node 1 train.py` would, instead of a plain process without
    LOCAL_RANK."""
    (tmp_path / "train.py").write_text(
        "import os\nimport torch\nimport torch.distributed as dist\n\n"
        "local_rank = int(os.environ[\"LOCAL_RANK\"])\n"
        "dist.init_process_group(\"nccl\")\ntorch.cuda.set_device(local_rank)\n"
        "model = torch.nn.Linear(4, 1).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(2):\n    loss = model(torch.ones(2, 4).cuda()).pow(2).mean()\n"
        "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"
        "dist.destroy_process_group()\n")
    monkeypatch.chdir(tmp_path)
    assert main(["port", "train.py", "--run", "--steps", "2", "--nproc", "1", "--json", "-"]) == 0
    run = json.loads(capfd.readouterr().out)["run"]
    assert run["ok"] and run["steps"] == 2 and run["nproc"] == 1


@pytest.mark.subprocess
def test_a_timed_out_script_that_ignores_sigterm_is_killed_after_the_stated_grace(tmp_path, monkeypatch, capfd):
    """`--timeout S` sends SIGTERM at S seconds, then SIGKILL TIMEOUT_GRACE seconds later (the help says so): a
    script that ignores SIGTERM is gone well before torchrun's own 30 s, and the run says it timed out."""
    import time

    from neuronkit.port import run as port_run

    monkeypatch.setattr(port_run, "TIMEOUT_GRACE", 1)
    (tmp_path / "stubborn.py").write_text("import signal, time\nimport torch\n\n"
                                          "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                          "model = torch.nn.Linear(2, 2).cuda()\ntime.sleep(600)\n")
    monkeypatch.chdir(tmp_path)
    start = time.monotonic()
    assert main(["port", "stubborn.py", "--run", "--timeout", "3", "--json", "-"]) == 1
    assert time.monotonic() - start < 20
    assert json.loads(capfd.readouterr().out)["run"]["error"].startswith("timed out after 3 s")
