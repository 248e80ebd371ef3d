"""`neuronkit port SCRIPT --run`: run the rewritten copy of the one script the user named on the simulated
device (under torchrun when asked for more than one process or when the script initialises a process
group), stopped after N optimizer steps, and collect what each rank recorded (`bootstrap.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, QualifiedNameProvider

from neuronkit.distributed.launch import stop
from neuronkit.port.scan import FileScan
from neuronkit.units import format_bytes

PROCESS_GROUP_INIT = "torch.distributed.init_process_group"
DEFAULT_DISTRIBUTED_NPROC = 2


@dataclass
class RunResult:
    """What a `--run` did: per-rank records, merged figures, and the run's command and wall time."""

    script: str
    nproc: int
    steps_asked: int
    wall_s: float
    returncode: int
    ranks: list[dict[str, Any]]
    blockers_hit: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    error_line: int | None = None

    @property
    def ok(self) -> bool:
        """Every rank finished or stopped after the asked steps, and no blocker was hit."""
        return (self.returncode == 0 and len(self.ranks) == self.nproc and not self.blockers_hit
                and all(r["exit_code"] == 0 for r in self.ranks))

    @property
    def steps(self) -> int:
        return min((r["steps"] for r in self.ranks), default=0)

    def fallbacks(self) -> list[dict[str, Any]]:
        """Every op that fell back on any rank, with the script lines (of the first step) that issued it."""
        sites: dict[str, set[int]] = {}
        for rank in self.ranks:
            for op in rank["fallback_ops"]:
                sites.setdefault(op, set())
            for site in rank["fallback_sites"]:
                if site["line"] is not None:
                    sites.setdefault(site["op"], set()).add(site["line"])
        return [{"op": op, "lines": sorted(lines)} for op, lines in sorted(sites.items())]

    def record(self) -> dict[str, Any]:
        """The run as JSON."""
        return {"script": self.script, "ok": self.ok, "nproc": self.nproc, "steps_asked": self.steps_asked,
                "steps": self.steps, "wall_s": round(self.wall_s, 3), "returncode": self.returncode,
                "error": self.error, "error_line": self.error_line, "blockers_hit": self.blockers_hit,
                "fallbacks": self.fallbacks(),
                "peak_memory": {core: peak for r in self.ranks for core, peak in r["peak_memory"].items()},
                "neff_compiles": sum(r["neff"]["misses"] for r in self.ranks),
                "neff_cache_hits": sum(r["neff"]["hits"] + r["neff"]["disk_hits"] for r in self.ranks),
                "ranks": [{k: r[k] for k in ("rank", "status", "steps", "error", "error_line", "script_s")}
                          for r in self.ranks]}


class _ProcessGroupCalls(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        names = self.get_metadata(QualifiedNameProvider, node.func, set())
        self.found = self.found or any(q.name == PROCESS_GROUP_INIT for q in names)


def initialises_process_group(text: str) -> bool:
    """Whether the script calls `torch.distributed.init_process_group` (however it imported it)."""
    finder = _ProcessGroupCalls()
    MetadataWrapper(cst.parse_module(text)).visit(finder)
    return finder.found


def launch_command(copy: Path, steps: int, nproc: int, distributed: bool, out: Path, script_args: list[str],
                   port: int | None = None) -> list[str]:
    """`python -m neuronkit.port.bootstrap ...`, under torchrun for a distributed run."""
    boot = ["-m", "neuronkit.port.bootstrap", "--steps", str(steps), "--out", str(out), "--script", str(copy),
            "--", *script_args]
    if not distributed:
        return [sys.executable, *boot]
    from neuronkit.distributed.launch import free_port
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
            f"--rdzv-endpoint=localhost:{port or free_port()}", *boot]


def run_script(scan: FileScan, steps: int = 20, nproc: int | None = None, script_args: list[str] | None = None,
               timeout: float = 600, workdir: str | os.PathLike | None = None) -> RunResult:
    """Run the rewritten copy of `scan`'s file (its findings' `rewrite` fixes applied) for `steps` optimizer
    steps: `nproc` processes under torchrun when it is above 1, one plain process when it is 1, and when it is
    None, torchrun with 2 if the script calls `init_process_group`, else one plain process. The copy lives in `workdir` (a temporary folder by default) under the script's own name; the
    script's folder stays importable. Errors and lines refer to the original file (the rewrite keeps lines)."""
    if nproc is None:  # torchrun when the script makes a process group, else one plain process
        distributed = initialises_process_group(scan.rewritten)
        nproc = DEFAULT_DISTRIBUTED_NPROC if distributed else 1
    else:  # as asked: one plain process (as `python train.py`), or torchrun with K
        distributed = nproc > 1
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="neuronkit-port-"))
    work.mkdir(parents=True, exist_ok=True)
    copy = work / scan.path.name
    copy.write_text(scan.rewritten, encoding="utf-8")
    out = work / "ranks"
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(scan.path.resolve().parent), os.environ.get("PYTHONPATH")]))}
    if distributed:
        env.setdefault("OMP_NUM_THREADS", "1")
        env.pop("NEURON_RT_VISIBLE_CORES", None)  # each rank gets its own core from the process group
    start = time.perf_counter()
    proc = subprocess.Popen(launch_command(copy, steps, nproc, distributed, out, script_args or []), env=env,
                            cwd=os.getcwd(), start_new_session=True)
    try:
        returncode = proc.wait(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        stop(proc)
        returncode, timed_out = proc.returncode, True
    wall = time.perf_counter() - start
    ranks = sorted((json.loads(p.read_text()) for p in out.glob("rank*.json")), key=lambda r: r["rank"])
    result = RunResult(str(scan.path), nproc, steps, wall, returncode, ranks)
    crashed = next((r for r in ranks if r["error"]), None)
    if crashed:
        result.error, result.error_line = crashed["error"], crashed["error_line"]
    elif timed_out:
        result.error = f"timed out after {timeout:g} s"
    elif returncode and not ranks:
        result.error = f"the launcher exited with {returncode} before the script ran"
    if result.error_line is not None:
        result.blockers_hit = [{"line": f.line, "rule": f.rule.id, "code": f.code} for f in scan.findings
                               if f.category == "blocker" and f.line == result.error_line]
    return result


def run_summary(result: RunResult) -> str:
    """The run in a few lines for the terminal."""
    r = result.record()
    head = (f"run: {Path(r['script']).name} on the simulated device, {r['nproc']} process"
            f"{'es' * (r['nproc'] != 1)}: {r['steps']}/{r['steps_asked']} optimizer steps in {r['wall_s']:.1f} s "
            f"-> {'ok' if r['ok'] else 'FAILED'}")
    lines = [head]
    if r["error"]:
        where = f"{r['script']}:{r['error_line']}: " if r["error_line"] else ""
        lines.append(f"  error: {where}{r['error']}")
    for hit in r["blockers_hit"]:
        lines.append(f"  blocker hit: line {hit['line']} [{hit['rule']}] {hit['code']}")
    for fb in r["fallbacks"]:
        where = ", ".join(f"line {n}" for n in fb["lines"]) or "after the first step"
        lines.append(f"  fell back to CPU: {fb['op']} ({where})")
    peaks = ", ".join(f"{core} {format_bytes(peak)}" for core, peak in sorted(r["peak_memory"].items()))
    lines.append(f"  peak memory: {peaks or 'none on device'}")
    lines.append(f"  NEFF compiles: {r['neff_compiles']} (cache hits {r['neff_cache_hits']})")
    return "\n".join(lines)
