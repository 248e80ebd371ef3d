"""Architecture zoo timings: building the tiny checkpoints (`data/build_zoo.py`, a fresh process), then
per family of data/zoo.toml its weightless audit and every stage of `neuronkit check`, in one process.

The first family pays the process's one-time costs (imports, Dynamo warm-up): read its compile column
with that in mind. Verdicts are the simulator's; "warn" here is a CPU fallback (e.g. `aten::minimum` in T5) or a caveat, listed by `neuronkit check`.

    python bench/bench_zoo.py [--write]

`--write` puts the table under "## Architecture zoo" in bench/RESULTS.md, leaving other sections alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
HEADING = "## Architecture zoo"


def measure() -> tuple[float, list[dict[str, object]]]:
    """Seconds to build the zoo, and one row per family: audit and check seconds, and the verdicts."""
    import neuronkit

    names = list(tomllib.loads((ROOT / "data" / "zoo.toml").read_text()))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "data" / "build_zoo.py"), "--out", tmp], check=True,
                       capture_output=True)
        build_s = time.perf_counter() - start
        for name in names:
            path = Path(tmp) / name
            built = time.perf_counter()
            report = neuronkit.audit(path, backward=True)
            audited = time.perf_counter()
            check = neuronkit.check(path, timing_runs=3)
            checked = time.perf_counter()
            stage_s = {s.stage: s.duration_s for s in check.stages}
            rows.append({"name": name, "audit_s": audited - built,
                         "blockers": len(report.summary.blockers), "check_s": checked - audited,
                         "compile_s": stage_s.get("compile", 0.0), "status": check.status,
                         "failed": ", ".join(s.stage for s in check.stages if s.status in ("fail", "error")) or "-"})
    return build_s, rows


def table(build_s: float, rows: list[dict[str, object]], wall_s: float, load: tuple[float, float]) -> str:
    """The RESULTS.md section."""
    lines = [HEADING, "",
             __doc__.split("\n\n")[1].replace("\n", " ").strip(), "",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
             f"run {time.strftime('%Y-%m-%d')}, {wall_s:.0f} s in all; building all {len(rows)} checkpoints "
             f"took {build_s:.1f} s (a fresh process, imports included); 1-minute load average {load[0]:.1f} at the "
             f"start and {load[1]:.1f} at the end (a shared VM: at a load above the CPU count every figure is "
             "inflated).", "",
             "| family | audit (fwd+bwd, weightless) | blocker ops | check (all stages) | of which compile | "
             "check status | failed stages |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['audit_s']:.2f} s | {r['blockers']} | "
                     f"{r['check_s']:.1f} s | {r['compile_s']:.1f} s | {r['status']} | {r['failed']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    start, load = time.perf_counter(), os.getloadavg()[0]
    build_s, rows = measure()
    text = table(build_s, rows, time.perf_counter() - start, (load, os.getloadavg()[0]))
    print(text)
    if args.write:
        current = RESULTS.read_text()
        pattern = re.compile(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", re.DOTALL | re.MULTILINE)
        updated = pattern.sub(lambda _: text + "\n", current) if pattern.search(current) else \
            current.rstrip() + "\n\n" + text
        RESULTS.write_text(updated)


if __name__ == "__main__":
    sys.exit(main())
