"""Parallel planner cost: `neuronkit plan` on a Llama-3-8B-sized config at 64 ranks, time and peak memory.

Each case runs in a fresh Python, so its peak RSS (`resource.getrusage`) is the planner's alone, imports
of torch and transformers included. Targets (issue 13): <= 60 s and <= 2 GB for one 64-rank layout.
It writes bench/results/plan.json (bench/harness.py); `python bench/make_results.py` puts it in RESULTS.md.

    python bench/bench_plan.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_audit import LLAMA_8B
from harness import Run

os.environ.setdefault("HF_HUB_OFFLINE", "1")
CASES = {
    "tp=4 × fsdp=16, seq 2048": "plan(cfg, tp=4, seq_len=2048)",
    "fsdp=8 × dp=2 × pp=4, seq 2048": "plan(cfg, fsdp=8, dp=2, pp=4, seq_len=2048)",
    "tp=8 × fsdp=8 × dp=2 on 2 instances": "plan(cfg, tp=8, fsdp=8, dp=2, nodes=2)",
    "--sweep, seq 8192": "sweep(cfg, seq_len=8192)",
}
_CHILD = """
import json, resource, sys, time
start = time.perf_counter()
from neuronkit.planner.plan import plan, sweep
cfg = sys.argv[1] + "/config.json"
result = {expr}
plans = result if isinstance(result, list) else [result]
print(json.dumps({{"seconds": time.perf_counter() - start,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "verdicts": [p.verdict() for p in plans]}}))
"""


def main() -> None:
    with Run("plan", "Parallel plan", "python bench/bench_plan.py") as run, tempfile.TemporaryDirectory() as tmp:
        run.columns(case="case", seconds=("wall time", "**{:.1f} s**"), rss_gb=("peak RSS", "**{:.2f} GB**"),
                    verdicts="verdict")
        run.note = ("`neuronkit.plan` on the Llama-3-8B-sized config of `bench_audit.py` (8.03B parameters, "
                    "bfloat16, micro-batch 1), each case in a fresh Python; time and peak RSS include importing "
                    "torch and transformers. Target for one 64-rank layout: <= 60 s and <= 2 GB.")
        (Path(tmp) / "config.json").write_text(json.dumps(LLAMA_8B))
        for label, expr in CASES.items():
            out = subprocess.run([sys.executable, "-c", _CHILD.format(expr=expr), tmp], capture_output=True,
                                 text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            run.row(case=label, seconds=round(r["seconds"], 2), rss_gb=round(r["rss"] / 1e9, 3),
                    verdicts=r["verdicts"])


if __name__ == "__main__":
    main()
