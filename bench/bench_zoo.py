"""Architecture zoo timings: building the tiny checkpoints (`data/build_zoo.py`, a fresh process), then
per family of data/zoo.toml its weightless audit and every stage of `neuronkit check`, in one process.

The first family pays the process's one-time costs (imports, Dynamo warm-up): read its compile column
with that in mind. Verdicts are the simulator's; "warn" here is a CPU fallback (e.g. `aten::minimum` in T5) or a caveat, listed by `neuronkit check`.

    python bench/bench_zoo.py

It writes bench/results/zoo.json (bench/harness.py); `python bench/make_results.py` puts it in RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from harness import Run

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent


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


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    with Run("zoo", "Architecture zoo", "python bench/bench_zoo.py") as run:
        run.columns(name="family", audit_s=("audit (fwd+bwd, weightless)", "{:.2f} s"), blockers="blocker ops",
                    check_s=("check (all stages)", "{:.1f} s"), compile_s=("of which compile", "{:.1f} s"),
                    status="check status", failed="failed stages")
        start = time.perf_counter()
        build_s, rows = measure()
        for row in rows:
            run.row(**row)
        run.note = (__doc__.split("\n\n")[1].replace("\n", " ").strip() + f" {time.perf_counter() - start:.0f} s in "
                    f"all; building all {len(rows)} checkpoints took {build_s:.1f} s (a fresh process, imports "
                    "included). At a load above the CPU count every figure is inflated.")


if __name__ == "__main__":
    sys.exit(main())
