"""`neuronkit port SCRIPT --run`: run the rewritten project on the simulated device, stopped after N optimizer
steps, and collect what each process recorded (`bootstrap.py`).

The rewritten files run from a copy that keeps the project's layout (`overlay`): the ported modules are
written, everything else beside them is linked, and the working directory is the copy of the user's one, so
paths relative to the script or to the working directory find the same files. How many processes: a script
that starts its own (mp.spawn, xmp.spawn) runs as one process that starts them; one that makes a process
group runs under torchrun (2 processes unless `nproc` says otherwise); any other in one process, or `nproc`
under torchrun. The temporary copy and every process the run started are gone when it returns."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper

from neuronkit.distributed.launch import stop
from neuronkit.errors import NeuronkitInputError
from neuronkit.port.matchers import called_names, facts_from
from neuronkit.port.scan import FileScan, Project
from neuronkit.units import format_bytes

DEFAULT_DISTRIBUTED_NPROC = 2
RUN_MARKER = "NEURONKIT_PORT_RUN"
TIMEOUT_GRACE = 10  # seconds a timed-out script has to stop after SIGTERM before it is killed


@dataclass
class RunResult:
    """What a `--run` did: per-process records, merged figures, and the run's wall time."""

    script: str
    nproc: int
    steps_asked: int
    wall_s: float
    returncode: int
    ranks: list[dict[str, Any]]
    launcher: dict[str, Any] | None = None  # the process that started the ranks itself (mp.spawn)
    findings_hit: list[dict[str, Any]] = field(default_factory=list)  # findings at the line the run failed on
    error: str | None = None
    error_file: str | None = None
    error_line: int | None = None

    @property
    def blockers_hit(self) -> list[dict[str, Any]]:
        return [f for f in self.findings_hit if f["category"] == "blocker"]

    @property
    def model_blockers(self) -> list[dict[str, Any]]:
        """What the op audit of the model the script trains found the device cannot run."""
        seen: dict[tuple[str, str], dict[str, Any]] = {}
        for rank in self.ranks:
            for blocker in (rank.get("model_audit") or {}).get("blockers", []):
                seen.setdefault((blocker["category"], blocker["op"]), blocker)
        return list(seen.values())

    @property
    def warnings(self) -> list[str]:
        found = list(dict.fromkeys(w for r in self.ranks for w in r.get("warnings", [])))
        if self.ranks and not any(r.get("device_ops") for r in self.ranks):
            if any(r["exit_code"] != 0 and r["steps"] == 0 for r in self.ranks):  # it stopped before working
                found.append("no op ran on the device: the script stopped before its first step")
            else:
                found.append("no op ran on the device: the script kept its CPU path (see the decide findings on "
                             "its CUDA checks)")
        return found

    @property
    def ok(self) -> bool:
        """Every process finished or stopped after the asked steps, having taken at least one, and neither a
        blocker finding nor the model's op audit stopped it."""
        return (self.returncode == 0 and self.nproc >= 1 and len(self.ranks) == self.nproc
                and not self.blockers_hit and not self.model_blockers
                and all(r["exit_code"] == 0 and r["steps"] >= 1 for r in self.ranks))

    @property
    def steps(self) -> int:
        return min((r["steps"] for r in self.ranks), default=0)

    @property
    def losses(self) -> list[float]:
        """The loss of each step, averaged over the processes (each process's own batch)."""
        series = [r.get("losses", []) for r in self.ranks]
        return [sum(step) / len(step) for step in zip(*series)] if series else []

    def fallbacks(self) -> list[dict[str, Any]]:
        """Every op that fell back on any process, with the lines (of the first step) that issued it: `lines` in
        the script, `elsewhere` in its other files (`file:line`)."""
        sites: dict[str, tuple[set[int], set[str]]] = {}
        for rank in self.ranks:
            for op in rank["fallback_ops"]:
                sites.setdefault(op, (set(), set()))
            for site in rank["fallback_sites"]:
                if site["line"] is not None:
                    lines, elsewhere = sites.setdefault(site["op"], (set(), set()))
                    if site.get("file") in (None, self.script):
                        lines.add(site["line"])
                    else:
                        elsewhere.add(f"{site['file']}:{site['line']}")
        return [{"op": op, "lines": sorted(lines), "elsewhere": sorted(elsewhere)}
                for op, (lines, elsewhere) in sorted(sites.items())]

    def record(self) -> dict[str, Any]:
        """The run as JSON."""
        return {"script": self.script, "ok": self.ok, "nproc": self.nproc, "steps_asked": self.steps_asked,
                "steps": self.steps, "wall_s": round(self.wall_s, 3), "returncode": self.returncode,
                "error": self.error, "error_file": self.error_file, "error_line": self.error_line,
                "blockers_hit": self.blockers_hit, "findings_hit": self.findings_hit,
                "model_blockers": self.model_blockers, "warnings": self.warnings, "losses": self.losses,
                "fallbacks": self.fallbacks(),
                "peak_memory": {core: peak for r in self.ranks for core, peak in r["peak_memory"].items()},
                "neff_compiles": sum(r["neff"]["misses"] for r in self.ranks),
                "neff_cache_hits": sum(r["neff"]["hits"] + r["neff"]["disk_hits"] for r in self.ranks),
                "launcher": None if self.launcher is None else {
                    k: self.launcher.get(k) for k in ("status", "error", "spawned")},
                "ranks": [{k: r.get(k) for k in ("process", "rank", "status", "steps", "error", "error_line",
                                                  "script_s")} for r in self.ranks]}


# --- what to launch ---------------------------------------------------------------------------------------------
def plan_processes(project: Project, nproc: int | None) -> tuple[int | None, bool]:
    """(processes, under torchrun): `None` processes when the script starts its own (counted as they start)."""
    if project.facts.spawns:
        if nproc is not None:
            raise NeuronkitInputError(
                f"{project.script}: the script starts its own processes (mp.spawn / xmp.spawn): set how many with "
                "its own arguments, not --nproc")
        return None, False
    if nproc is None:
        return (DEFAULT_DISTRIBUTED_NPROC, True) if project.facts.own_group else (1, False)
    return nproc, nproc > 1 or project.facts.own_group  # a torchrun script reads RANK/LOCAL_RANK with one rank too


def launch_command(copy: Path, steps: int, nproc: int, distributed: bool, out: Path, script_args: list[str],
                   files: list[Path] = (), port: int | None = None, audit: bool = True) -> list[str]:
    """`python -u -m neuronkit.port.bootstrap ...`, under torchrun for a distributed run. The interpreter is
    torchrun's (`PYTHON_EXEC` when set, as torchrun starts its workers), so the one-process run and a rank
    start the same way."""
    boot = ["-m", "neuronkit.port.bootstrap", "--steps", str(steps), "--out", str(out), "--script", str(copy),
            *(f"--file={f}" for f in files), *([] if audit else ["--no-audit"]), "--", *script_args]
    if not distributed:
        return [os.environ.get("PYTHON_EXEC", sys.executable), "-u", *boot]
    from neuronkit.distributed.launch import free_port
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
            f"--rdzv-endpoint=localhost:{port or free_port()}", *boot]


# --- the copy ---------------------------------------------------------------------------------------------------
@dataclass
class Overlay:
    """The rewritten project in a folder of its own: each copy, the file it stands for, and where to run."""

    script: Path
    copies: dict[Path, FileScan]  # copy -> scan of the original
    cwd: Path
    pythonpath: list[Path]


def overlay(project: Project, work: Path) -> Overlay:
    """Lay the rewritten files out under `work` as the originals lie under their common folder, with every
    other entry of the folders on their way linked (not `__pycache__`): the copy imports the rewritten modules
    and reads the project's own data at the same relative paths."""
    assert project.script is not None
    scans = {s.path.resolve(): s for s in project.scans}
    cwd = Path.cwd().resolve()
    anchors = [*scans, *project.roots]
    base = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in anchors]))
    wanted = [*scans, *(r for r in project.roots), *([cwd] if cwd.is_relative_to(base) else [])]
    chain = {base}
    for path in wanted:
        for parent in (path if path.is_dir() else path.parent, *(path if path.is_dir() else path.parent).parents):
            if not parent.is_relative_to(base):
                break
            chain.add(parent)
    for folder in sorted(chain):
        (work / folder.relative_to(base)).mkdir(parents=True, exist_ok=True)
        for entry in folder.iterdir():
            if entry in chain or entry in scans or entry.name == "__pycache__":
                continue
            link = work / entry.relative_to(base)
            if not link.exists():
                link.symlink_to(entry)
    def inside(path: Path) -> Path:
        return work / path.relative_to(base)

    copies = {}
    for path, scan in scans.items():
        inside(path).write_text(scan.rewritten, encoding="utf-8")
        copies[inside(path)] = scan
    extra = [inside(r) for r in project.roots[1:]]
    for entry in filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)):
        path = Path(entry).resolve()
        extra.append(inside(path) if path.is_relative_to(base) and path in chain else path)
    return Overlay(inside(project.script.resolve()), copies, inside(cwd) if cwd.is_relative_to(base) else cwd,
                   extra)


# --- the run ----------------------------------------------------------------------------------------------------
def _project_of(target: Project | FileScan) -> Project:
    if isinstance(target, Project):
        return target
    facts = facts_from(called_names(MetadataWrapper(cst.parse_module(target.original))))
    return Project(target.path, [target], [target.path.resolve().parent], facts)


def run_script(target: Project | FileScan, steps: int = 20, nproc: int | None = None,
               script_args: list[str] | None = None, timeout: float = 600,
               workdir: str | os.PathLike | None = None, audit: bool = True, output: Any = None) -> RunResult:
    """Run the rewritten project (`target`: a scanned project, or one scanned file) for `steps` optimizer
    steps (see the module's docstring for how many processes). The copy lives in `workdir` when given (kept),
    else in a temporary folder removed at the end. Errors and lines refer to the original files. The script's
    output goes to `output` (a file object; this process's stdout by default)."""
    project = _project_of(target)
    if project.script is None:
        raise NeuronkitInputError("--run runs a script: name the .py file first")
    planned, distributed = plan_processes(project, nproc)
    if workdir is not None:  # kept: the rewritten files and the records, not the links to the project's own
        Path(workdir).mkdir(parents=True, exist_ok=True)
        try:
            return _run(project, Path(workdir), steps, planned, distributed, script_args or [], timeout, audit,
                        output)
        finally:
            for folder, dirs, files in os.walk(Path(workdir) / "project"):  # os.walk enters no linked folder
                for name in dirs + files:
                    if os.path.islink(os.path.join(folder, name)):
                        os.unlink(os.path.join(folder, name))
    with tempfile.TemporaryDirectory(prefix="neuronkit-port-") as work:
        return _run(project, Path(work), steps, planned, distributed, script_args or [], timeout, audit, output)


def _run(project: Project, work: Path, steps: int, planned: int | None, distributed: bool, script_args: list[str],
         timeout: float, audit: bool, output: Any) -> RunResult:
    layout = overlay(project, work / "project")
    out = work / "processes"
    marker = uuid.uuid4().hex  # every process the run starts inherits it: how they are all found at the end
    env = {**os.environ, "HF_HUB_OFFLINE": "1", RUN_MARKER: marker,
           "PYTHONPATH": os.pathsep.join(str(p) for p in [layout.script.parent, *layout.pythonpath])}
    if distributed:
        env.setdefault("OMP_NUM_THREADS", "1")
        env.pop("NEURON_RT_VISIBLE_CORES", None)  # each rank gets its own core from the process group
    others = [c for c in layout.copies if c != layout.script]
    command = launch_command(layout.script, steps, planned or 1, distributed, out, script_args, others, audit=audit)
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, cwd=layout.cwd, start_new_session=True, stdout=output)
    timed_out = False
    try:
        returncode = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(proc, grace=TIMEOUT_GRACE)
        returncode, timed_out = proc.returncode, True
    except BaseException:  # Ctrl-C or SIGTERM: as on a timeout, the launcher stops what it stands for (a process
        # a fork server forked for it carries the marker only in os.environ, which /proc does not show)
        stop(proc, grace=5)
        raise
    finally:
        _end_processes(proc.pid, marker)
    wall = time.perf_counter() - start
    ranks, launcher = read_records(out)
    nproc = planned if planned is not None else (launcher or {}).get("spawned", 0)
    result = RunResult(str(project.script), nproc, steps, wall, returncode, ranks, launcher)
    _explain(result, layout, timed_out, timeout)
    return result


def read_records(out: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The records the run's processes wrote: the ranks (in rank order) and the launcher, if the script
    started its processes itself."""
    records = [json.loads(p.read_text()) for p in out.glob("*.json")]
    launcher = next((r for r in records if r["process"] == "launcher"), None)
    return sorted((r for r in records if r["process"] != "launcher"), key=lambda r: r["rank"]), launcher


def _end_processes(pgid: int, marker: str, patience: float = 5.0) -> None:
    """Whatever the run started and left running (a helper process the script forgot) is stopped: its session,
    and every process whose environment carries the run's marker (one started outside the session, e.g. torchrun's
    workers, each in a session of its own; a process a fork server forks shows no marker here: `_run` has its
    launcher stop it first). SIGKILL is delivered asynchronously, and a dying process's
    environment already reads empty, so the processes found are followed by id until each is gone or a corpse
    waiting for its parent (up to `patience` seconds); a marked process started meanwhile joins them."""
    needle = f"{RUN_MARKER}={marker}".encode()
    found: set[int] = set()
    deadline = time.monotonic() + patience
    while True:
        current = _run_processes(pgid, needle)
        found |= current
        alive = {pid for pid in found if _state(pid) not in (None, "Z", "X")}
        if not alive or time.monotonic() >= deadline:
            return
        for pid in alive & current:  # killed only while it is still the run's (an id is reused once reaped)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def _run_processes(pgid: int, needle: bytes) -> set[int]:
    """The processes in the run's process group, or whose environment carries `needle`."""
    found = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            group = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2])
            if group == pgid or needle in (proc / "environ").read_bytes().split(b"\0"):
                found.add(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _state(pid: int) -> str | None:
    """A process's state letter (R, S, Z, ...), or None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _explain(result: RunResult, layout: Overlay, timed_out: bool, timeout: float) -> None:
    """The run's error in the original files' terms, and the findings at the line it failed on."""
    scans = {str(copy): scan for copy, scan in layout.copies.items()}
    for record in [*result.ranks, *([result.launcher] if result.launcher else [])]:
        for site in record.get("fallback_sites", []):
            scan = scans.get(site.get("file") or "")
            if scan is not None:
                site["file"], site["line"] = str(scan.path), scan.original_line(site["line"])
        scan = scans.get(record.get("error_file") or "")
        if scan is not None:
            record["error_file"], record["error_line"] = str(scan.path), scan.original_line(record["error_line"])
    crashed = next((r for r in [*result.ranks, result.launcher] if r and r["error"]), None)
    if crashed:
        result.error = _short(crashed["error"])
        result.error_file, result.error_line = crashed.get("error_file"), crashed.get("error_line")
    elif timed_out:
        result.error = f"timed out after {timeout:g} s"
    elif result.returncode and not result.ranks:
        result.error = f"the launcher exited with {result.returncode} before the script ran"
    elif result.nproc == 0 or (result.launcher is not None and not result.ranks):
        result.error = "the script started no processes (mp.spawn with nprocs=0: see its process count's findings)"
    if result.error_line is not None:
        failing = next((s for s in layout.copies.values() if str(s.path) == result.error_file), None)
        for f in failing.findings if failing else ():
            if f.line == result.error_line and not f.fixed:
                result.findings_hit.append({"line": f.line, "rule": f.rule.id, "category": f.category,
                                            "code": f.code, "remedy": f.rule.remedy})


def _short(error: str, limit: int = 300) -> str:
    """An error as one line of at most `limit` characters."""
    return error if len(error) <= limit else error[:limit - 3] + "..."


def run_summary(result: RunResult) -> str:
    """The run in a few lines for the terminal."""
    r = result.record()
    launched = "" if result.launcher is None else " started by the script"
    head = (f"run: {Path(r['script']).name} on the simulated device, {r['nproc']} process"
            f"{'es' * (r['nproc'] != 1)}{launched}: {r['steps']}/{r['steps_asked']} optimizer steps in "
            f"{r['wall_s']:.1f} s -> {'ok' if r['ok'] else 'FAILED'}")
    lines = [head]
    if r["error"]:
        where = f"{r['error_file']}:{r['error_line']}: " if r["error_line"] else ""
        lines.append(f"  error: {where}{r['error']}")
    for hit in r["findings_hit"]:
        kind = "blocker hit" if hit["category"] == "blocker" else f"{hit['category']} finding at that line"
        lines.append(f"  {kind}: line {hit['line']} [{hit['rule']}] {hit['code']} -> {hit['remedy']}")
    for blocker in r["model_blockers"]:
        lines.append(f"  model blocker (op audit): {blocker['op']} [{blocker['category']}] in "
                     f"{', '.join(blocker['modules']) or 'the model'} -> {blocker['remedy']}")
    if r["losses"]:
        lines.append("  loss: " + ", ".join(f"{loss:.4f}" for loss in r["losses"][:8]))
    for warning in r["warnings"]:
        lines.append(f"  warning: {warning}")
    if result.ranks and any(rank["steps"] == 0 for rank in result.ranks) and not r["error"]:
        lines.append("  the script took no optimizer step")
    for fb in r["fallbacks"]:
        where = ", ".join([*(f"line {n}" for n in fb["lines"]), *fb["elsewhere"]]) or "after the first step"
        lines.append(f"  fell back to CPU: {fb['op']} ({where})")
    peaks = ", ".join(f"{core} {format_bytes(peak)}" for core, peak in sorted(r["peak_memory"].items()))
    lines.append(f"  peak memory: {peaks or 'none on device'}")
    lines.append(f"  NEFF compiles: {r['neff_compiles']} (cache hits {r['neff_cache_hits']})")
    return "\n".join(lines)
