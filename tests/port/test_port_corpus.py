"""The port corpus: training projects written for these tests in the styles public repositories use
(tests/port/corpus/projects/: a single-file GPT trainer with torch.compile, a guarded image trainer, a package
with its CUDA in a local module, an mp.spawn DDP script, a float16 script, a PyTorch/XLA loop, an XLA +
xmp.spawn script; no third-party code).

Each line a person must change for Trainium is marked `# must: RULE...`, each line where a finding is right but
nothing has to change `# may: RULE...`: the scan's precision and recall are measured against those marks. Each
project is ported and run for 3 optimizer steps in 1 and in 2 processes on the simulated device, its losses held
to the original's run on the CPU (every project splits a global batch over its processes, and logs the loss of
its own share, so the mean over 2 processes is the 1-process loss; the XLA scripts' CPU run uses
tests/port/corpus/xla_cpu, a stand-in for torch_xla on the CPU).

The processes start as `neuronkit port --run` starts them, through PYTHON_EXEC (forked from the session's rank
server, tests/conftest.py); 2 ranks get torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT) directly, so no torchrun launcher is paid for; processes a script spawns are forked
(tests/port/port_parity_job.py). `--run`'s own torchrun and spawn launches are tested in tests/port/test_port.py.
"""

from __future__ import annotations

import functools
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
import pytest
from conftest import ROOT

from neuronkit.distributed.launch import free_port
from neuronkit.port.xla_rewrites import used_outside_imports
from neuronkit.port.run import RunResult, overlay, read_records
from neuronkit.port.scan import FileScan, Project, scan_project

PROJECTS = ROOT / "tests" / "port" / "corpus" / "projects"
XLA_CPU = ROOT / "tests" / "port" / "corpus" / "xla_cpu"
TESTS = ROOT / "tests" / "port"  # port_parity_job
STEPS = 3


@dataclass(frozen=True)
class Item:
    """A corpus project: its script, the arguments of its CPU run and of its ported run ({n}: the process
    count of a script that spawns its processes, {port}: a free port, {one}: whether it runs in one process),
    and how close its losses must be."""

    name: str
    script: str
    cpu_args: tuple[str, ...] = ()
    port_args: tuple[str, ...] = ()
    spawns: bool = False
    xla: bool = False
    rtol: float = 3e-3  # Adam amplifies the device's float32 rounding differences a little after step 0

    @property
    def path(self) -> Path:
        return PROJECTS / self.name / self.script


ITEMS = [
    # compiled (backend="neuron", the rewrite) in one process; eager in two, which checks the same DDP path
    Item("gpt_trainer", "train.py", ("--device=cpu", "--compile=False", "--dtype=float32"),
         ("--dtype=float32", "--compile={one}")),
    Item("image_trainer", "main.py", ("--epochs", "1"), ("--epochs", "1")),
    Item("package_project", "train.py"),
    Item("ddp_spawn", "main.py", ("--world-size", "{n}", "--port", "{port}"), ("--world-size", "{n}", "--port", "{port}"),
         spawns=True),
    Item("fp16_amp", "train.py", rtol=2e-2),  # float16 autocast on the device against float32 on the CPU
    Item("xla_loop", "train.py", ("--epochs", "1"), ("--epochs", "1"), xla=True),
    Item("xla_spawn", "train.py", ("--num-cores", "{n}"), ("--num-cores", "{n}"), spawns=True, xla=True),
]


@functools.cache
def _project(item: Item) -> Project:
    return scan_project([item.path])


def _scans(item: Item) -> list[FileScan]:
    return _project(item).scans


# --- precision and recall of the scan ---------------------------------------------------------------------------
def _marks(path: Path) -> dict[int, tuple[set[str], set[str]]]:
    """line -> (rules that must report it, rules that may)."""
    marks = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        must = set(re.findall(r"\w[\w-]*", m.group(1))) if (m := re.search(r"# must: ([^;#]+)", line)) else set()
        may = set(re.findall(r"\w[\w-]*", m.group(1))) if (m := re.search(r"may: ([^;#]+)", line)) else set()
        if must or may:
            marks[number] = (must, may)
    return marks


def test_the_scan_finds_the_lines_a_person_must_change_with_the_right_rule(capsys):
    findings = right = must_lines = recalled = 0
    misses, wrong = [], []
    for item in ITEMS:
        for scan in _scans(item):
            marks = _marks(Path(scan.path))
            findings += len(scan.findings)
            for f in scan.findings:
                must, may = marks.get(f.line, (set(), set()))
                if f.rule.id in must | may:
                    right += 1
                else:
                    wrong.append(f"{scan.path}:{f.line} [{f.rule.id}]")
            for line, (must, _) in marks.items():
                if must:
                    must_lines += 1
                    if any(f.line == line and f.rule.id in must for f in scan.findings):
                        recalled += 1
                    else:
                        misses.append(f"{scan.path}:{line} {sorted(must)}")
    precision, recall = right / findings, recalled / must_lines
    with capsys.disabled():
        print(f"\nport corpus: {findings} findings, precision {precision:.1%}; {must_lines} lines to change, "
              f"recall {recall:.1%}")
    assert precision >= 0.97, wrong
    assert recall >= 0.95, misses


def test_the_ported_xla_scripts_import_nothing_from_torch_xla():
    for item in ITEMS:
        if item.xla:
            (scan,) = _scans(item)
            module = cst.parse_module(scan.rewritten)
            assert "torch_xla" not in {_dotted(n) for n in _walk(module) if isinstance(n, (cst.Import, cst.ImportFrom))
                                       for n in ([n.module] if isinstance(n, cst.ImportFrom) else
                                                 [a.name for a in n.names]) if n is not None}
            assert not used_outside_imports(module) & {"xm", "pl", "xmp", "torch_xla"}, item.name
            assert all(f.fixed for f in scan.findings if f.category == "rewrite"), item.name


def _dotted(node: cst.BaseExpression) -> str:
    return node.value if isinstance(node, cst.Name) else _dotted(node.value).split(".")[0]  # type: ignore[attr-defined]


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


# --- the runs ---------------------------------------------------------------------------------------------------
def _start(item: Item, script: Path, files: list[Path], out: Path, args: list[str], env: dict[str, str],
           cwd: Path) -> subprocess.Popen:
    command = [os.environ.get("PYTHON_EXEC", sys.executable), "-u", "-m", "port_parity_job",
               *(["--fork-spawns"] if item.spawns else []), "--steps", str(STEPS), "--out", str(out),
               "--script", str(script), *(f"--file={f}" for f in files), "--no-audit", "--", *args]
    return subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _run(item: Item, variant: str, nproc: int, work: Path) -> RunResult:
    """The original (`cpu`) or the ported project (`port`) for STEPS steps in `nproc` processes."""
    out, cwd = work / f"{variant}{nproc}", work / f"cwd-{variant}{nproc}"
    cwd.mkdir()
    pythonpath = [str(TESTS)]
    if variant == "cpu":
        script, files = item.path, []
        if item.xla:
            pythonpath.append(str(XLA_CPU))
    else:
        os.chdir(item.path.parent)  # the run's working directory is the copy of the script's folder
        layout = overlay(_project(item), work / f"tree{nproc}")
        script, files, cwd = layout.script, [c for c in layout.copies if c != layout.script], layout.cwd
        pythonpath += [str(p) for p in layout.pythonpath]
    args = [a.format(n=nproc, port=free_port(), one=nproc == 1)
            for a in (item.cpu_args if variant == "cpu" else item.port_args)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    if item.spawns or nproc == 1:
        procs = [_start(item, script, files, out, args, env, cwd)]
    else:  # torchrun's environment for each rank
        port = str(free_port())
        procs = [_start(item, script, files, out, args, {**env, "RANK": str(r), "LOCAL_RANK": str(r),
                                                          "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc),
                                                          "MASTER_ADDR": "localhost", "MASTER_PORT": port}, cwd)
                 for r in range(nproc)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    returncode = max(p.returncode for p in procs)
    ranks, launcher = read_records(out)
    result = RunResult(str(item.path), nproc, STEPS, time.perf_counter() - start, returncode, ranks, launcher)
    assert returncode == 0 and result.steps == STEPS and len(ranks) == nproc, (variant, nproc, errors[-1][-3000:])
    return result


def _close(losses: list[float], reference: list[float], rtol: float) -> bool:
    return len(losses) == len(reference) == STEPS and all(
        math.isclose(a, b, rel_tol=rtol) for a, b in zip(losses, reference))


@pytest.mark.subprocess
@pytest.mark.parametrize("item", ITEMS, ids=lambda i: i.name)
def test_each_project_runs_ported_in_1_and_2_processes_with_the_losses_of_its_cpu_run(item, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    reference = _run(item, "cpu", 1, tmp_path).losses
    for nproc in (1, 2):
        result = _run(item, "port", nproc, tmp_path)
        assert all(rank["device_ops"] > 0 for rank in result.ranks), "ran on the CPU"
        assert _close(result.losses, reference, item.rtol), (nproc, result.losses, reference)
