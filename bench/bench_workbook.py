"""Wall time of the whole workbook on the bundled model: `neuronkit run tiny-qwen3`, end to end.

Arms interleaved run by run (`neuronkit.timing.interleaved_medians`), chosen with `--arms`: `fork` (the
default: each notebook's kernel is forked from one process that imported torch & co. once, one notebook
ahead), `warm` (`--kernels warm`: each kernel a fresh interpreter importing them, one notebook ahead)
and `cold` (`--kernels cold`: papermill starts each kernel when its notebook begins). Each run is a
fresh `neuronkit run` process into a fresh run directory; the figure is the median over `--rounds`, with
the 1-minute load average before each run (the machine is shared: read every figure with its load).
With `--baseline DIR` the arms are instead this tree and another checkout of neuronkit (its notebooks and
library, through PYTHONPATH), each with its default kernels: how much a change costs or saves.

    python bench/bench_workbook.py --rounds 3                  # fork vs warm
    python bench/bench_workbook.py --rounds 3 --arms fork,cold
    python bench/bench_workbook.py --rounds 3 --baseline /tmp/neuronkit-main
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import Run, interleaved_medians


# Each arm's `neuronkit run` flags.
ARMS = {mode: ("--kernels", mode) for mode in ("fork", "warm", "cold")}


def workbook(out_root: Path, *flags: str, tree: Path | None = None, loads: list[str] | None = None):
    """A function running `neuronkit run tiny-qwen3` into a new directory under out_root each call (with
    `tree`, the neuronkit found there), noting in `loads` the load average before each run and the CPU
    seconds the run's processes used (kernels and fork server included: each is waited for by its
    parent), which other jobs on the machine change far less than the wall time."""
    counter = iter(range(1_000_000))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **({"PYTHONPATH": str(tree)} if tree else {})}

    def run() -> None:  # run outside any checkout: `python -m` would import the neuronkit in its cwd first
        if loads is not None:
            loads.append(f"{os.getloadavg()[0]:.1f}")
        out_root.mkdir(parents=True, exist_ok=True)
        out = out_root / f"run{next(counter)}"
        cpu = _children_cpu()
        proc = subprocess.run([sys.executable, "-m", "neuronkit.cli", "run", "tiny-qwen3", "--out", str(out),
                               *flags], capture_output=True, text=True, env=env, cwd=out_root)
        if loads is not None:
            loads[-1] += f" ({_children_cpu() - cpu:.0f} s CPU)"
        if proc.returncode != 0:
            raise SystemExit(f"neuronkit run {' '.join(flags)} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}")

    return run


def _children_cpu() -> float:
    """User + system seconds of this process's finished children (and theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs per arm (default 3)")
    parser.add_argument("--arms", default="fork,warm", help=f"two of {', '.join(ARMS)} (default fork,warm)")
    parser.add_argument("--baseline", type=Path, help="another neuronkit checkout to compare this tree with")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    names = args.arms.split(",")
    if len(names) != 2 or not set(names) <= set(ARMS):
        parser.error(f"--arms takes two of {', '.join(ARMS)}, e.g. fork,warm")
    loads: dict[str, list[str]] = {}
    command = f"python bench/bench_workbook.py --rounds {args.rounds} " + (
        f"--baseline {args.baseline}" if args.baseline else f"--arms {args.arms}")
    with Run("workbook", "Whole workbook (`neuronkit run tiny-qwen3`)", command) as run, \
            tempfile.TemporaryDirectory() as tmp:
        trees = {"this": here, "baseline": args.baseline.resolve()} if args.baseline else {}
        arms = ({arm: workbook(Path(tmp) / arm, tree=tree, loads=loads.setdefault(arm, []))
                 for arm, tree in trees.items()} if trees else
                {arm: workbook(Path(tmp) / arm, *ARMS[arm], loads=loads.setdefault(arm, [])) for arm in names})
        medians = interleaved_medians(arms, runs=args.rounds, warmup=0)
        run.columns(arm="arm", seconds=("median wall", "{:.1f} s"), ratio=("against the second arm", "{:.2f}x"),
                    runs="each run: 1-min load before it (CPU seconds)")
        run.note = (f"Each run a fresh `neuronkit run` process into a fresh run directory, arms interleaved; the "
                    f"median over {args.rounds} runs.")
        second = list(medians)[1]
        for arm, ms in medians.items():
            run.row(arm=arm, seconds=ms / 1e3, ratio=ms / medians[second], runs=loads[arm])
    return 0


if __name__ == "__main__":
    sys.exit(main())
