"""`neuronkit port --run` against the same training script on the CPU (issue 23's target: at most 1.5x).

The script is the bundled example (`neuronkit/data/examples/train_cuda.py`), training the bundled tiny-qwen3
for 20 optimizer steps. Two commands, each a fresh process, interleaved (A, B, A, B, ...) so machine noise hits
both alike; median wall time of `--rounds` runs each, and the ratio of the medians:

  cpu   python train_cuda.py --model tiny-qwen3 --steps 20          (no GPU: the script trains on the CPU)
  port  neuronkit port train_cuda.py --run --steps 20 --nproc 1 -- --model tiny-qwen3 --steps 20
        (scan, rewrite, one process on the simulated device, stopped by the optimizer-step hook)

Both pay Python's, torch's and transformers' start-up; `port` also pays the scan and its own start-up. Wall
and CPU time (user + system of the command and its children) are both recorded: on a loaded machine the
CPU time is the steadier figure.
It writes bench/results/port.json (bench/harness.py); `python bench/make_results.py` puts it in RESULTS.md.

    python bench/bench_port.py [--rounds 5] [--steps 20]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import Run
from neuronkit.resources import data_dir

EXAMPLE = data_dir() / "examples" / "train_cuda.py"
MODEL = data_dir() / "models" / "tiny-qwen3"


def commands(script: Path, steps: int) -> dict[str, list[str]]:
    """The two commands compared."""
    script_args = ["--model", str(MODEL), "--steps", str(steps)]
    return {
        "cpu": [sys.executable, str(script), *script_args],
        "port": [sys.executable, "-m", "neuronkit.cli", "port", str(script), "--run", "--steps", str(steps),
                 "--nproc", "1", "--", *script_args],
    }


def timed_run(command: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, the command and its children) of one command, which must
    succeed. CPU time is what a loaded machine distorts least."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-port-"))
    script = work / "train_cuda.py"
    script.write_text(EXAMPLE.read_text())
    cmds = commands(script, args.steps)
    with Run("port", "Port your script", f"python bench/bench_port.py --rounds {args.rounds} --steps "
             f"{args.steps}") as run:
        measure(run, cmds, work, args.rounds, args.steps)


def measure(run: Run, cmds: dict[str, list[str]], work: Path, rounds: int, steps: int) -> None:
    """Each command `rounds` times, interleaved, after one warm run each: medians of wall and CPU time."""
    for command in cmds.values():  # warm the page cache and the NEFF cache's directory once
        timed_run(command, work)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
    for _ in range(rounds):
        for name, command in cmds.items():
            samples[name].append(timed_run(command, work))
    wall = {name: statistics.median(w for w, _ in values) for name, values in samples.items()}
    cpu = {name: statistics.median(c for _, c in values) for name, values in samples.items()}
    run.columns(command="command", wall_s=("median wall", "{:.2f} s"), cpu_s=("median CPU", "{:.2f} s"),
                wall_ratio=("wall / cpu command", "**{:.2f}x**"), cpu_ratio=("CPU / cpu command", "**{:.2f}x**"),
                runs="runs: wall / CPU (s)")
    run.note = (f"{steps} optimizer steps of tiny-qwen3, {rounds} interleaved runs of each command. Target: "
                "port / cpu <= 1.5x.")
    for name, values in samples.items():
        run.row(command=name, wall_s=wall[name], cpu_s=cpu[name], wall_ratio=wall[name] / wall["cpu"],
                cpu_ratio=cpu[name] / cpu["cpu"], runs=[f"{w:.1f} / {c:.1f}" for w, c in values])


if __name__ == "__main__":
    main()
