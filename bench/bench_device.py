"""Simulated-device overhead: time on `neuron` over time on plain CPU, same model, same process.

CPU and neuron calls are interleaved (`neuronkit.timing.interleaved_medians`) so machine noise hits both
alike; each round takes the median of its runs and the figure is the median over rounds (gpt-fast's
discipline: warm up, then time with the device synchronized). Workloads: forward and training step (fwd +
bwd + AdamW) on the bundled tiny-qwen3 (batch 4 x 64 tokens; forward also at batch 1 x 32) and on a
~100M-parameter Qwen3 config with random weights; and the fixed cost of one op, an 8-element add (blocks of
2,000 calls, interleaved, microseconds per call). `--cpu-time` times this process's CPU time on one
thread instead of wall time, for a machine other jobs load (their CPU use then does not count).

With `--baseline DIR --alternations N` the script instead runs itself N times in this tree and N times in DIR
(another neuronkit checkout with its extension built, imported through PYTHONPATH), one process each, the trees
alternating (this, baseline, this, ...), and reports each workload's ratio per process and their median, per tree:
a before/after comparison measured in one sitting.

    python bench/bench_device.py [--rounds 5] [--skip-100m] [--cpu-time] [--baseline DIR [--alternations 3]]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

from harness import Run, interleaved_medians  # noqa: E402
from neuronkit.resources import data_dir  # noqa: E402

DATA = data_dir() / "models"
CLOCK = time.perf_counter


def workloads(model: torch.nn.Module, device: torch.device, seq: int, batch: int) -> dict[str, Callable]:
    model = copy.deepcopy(model).to(device)
    ids = torch.randint(0, model.config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(0))
    ids = ids.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def forward() -> None:
        with torch.no_grad():
            model(input_ids=ids)

    def train_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()

    return {"forward": forward, "train_step": train_step}


def compare(run: Run, name: str, model: torch.nn.Module, seq: int, batch: int, runs: int, rounds: int,
            kinds: tuple[str, ...] = ("forward", "train_step")) -> None:
    cpu, neuron = torch.device("cpu"), torch.device("neuron")
    loads = {d: workloads(model, d, seq, batch) for d in (cpu, neuron)}
    for kind in kinds:
        for d in (cpu, neuron):  # warm-up: first calls fill caches (and the simulated NEFF cache)
            for _ in range(2):
                loads[d][kind]()
        per_round = [interleaved_medians({"cpu": loads[cpu][kind], "neuron": loads[neuron][kind]}, runs, warmup=0,
                                         clock=CLOCK)
                     for _ in range(rounds)]
        c = statistics.median(r["cpu"] for r in per_round)
        n = statistics.median(r["neuron"] for r in per_round)
        run.row(workload=f"{name} {kind} (batch {batch}, seq {seq})", cpu=c, neuron=n, ratio=n / c, unit="ms")


def per_op(run: Run, rounds: int) -> None:
    """Microseconds per 8-element `a + b` on CPU and on `neuron` (float32), blocks of calls interleaved."""
    calls = 2000
    pairs = {name: (torch.ones(8, device=name), torch.ones(8, device=name)) for name in ("cpu", "neuron")}

    def block(a: torch.Tensor, b: torch.Tensor) -> Callable[[], None]:
        def run() -> None:
            for _ in range(calls):
                a + b
        return run

    per_round = [interleaved_medians({name: block(*pair) for name, pair in pairs.items()}, 5, warmup=1, clock=CLOCK)
                 for _ in range(rounds)]
    c = statistics.median(r["cpu"] for r in per_round) * 1000 / calls
    n = statistics.median(r["neuron"] for r in per_round) * 1000 / calls
    run.row(workload="8-element add, per op", cpu=c, neuron=n, ratio=n / c, unit="µs")


def _commit(tree: Path) -> str:
    """The tree's commit (with `+changes` when its work tree differs), or its directory's name outside git."""
    def git(*argv: str) -> str:
        return subprocess.run(["git", "-C", str(tree), *argv], capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") if (tree / ".git").exists() else ""
    if not head:
        return f"`{tree.name}` (not a git checkout)"
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def against_baseline(args: argparse.Namespace, flags: str) -> None:
    """This tree against `args.baseline`, one process per run, the trees alternating."""
    trees = {"this": Path(__file__).resolve().parent.parent, "baseline": args.baseline.resolve()}
    command = f"python bench/bench_device.py --rounds {args.rounds}{flags} --baseline {args.baseline} " \
              f"--alternations {args.alternations}"
    with Run("device", "Simulated device overhead", command) as run:  # its load before: the first process's
        _against_baseline(run, trees, args, flags)


def _against_baseline(run: Run, trees: dict[str, Path], args: argparse.Namespace, flags: str) -> None:
    ratios: dict[tuple[str, str], list[float]] = {}
    loads: dict[str, list[float]] = {arm: [] for arm in trees}
    for _ in range(args.alternations):
        for arm, tree in trees.items():
            loads[arm].append(round(os.getloadavg()[0], 2))
            env = {**os.environ, "PYTHONPATH": str(tree)}
            out = subprocess.run([sys.executable, str(tree / "bench" / "bench_device.py"), "--rounds",
                                  str(args.rounds), *flags.split()], cwd=tree, env=env, check=True,
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                if line.startswith("{"):
                    row = json.loads(line)
                    ratios.setdefault((row["workload"], arm), []).append(row["ratio"])
    run.columns(workload="workload", tree="tree", ratio=("median ratio", "{:.2f}x"),
                runs=("each process's ratio", "{:.2f}x"))
    run.note = (f"This tree at {_commit(trees['this'])}, baseline {_commit(trees['baseline'])}. "
                f"Ratio = simulated neuron / CPU, each from one process of `bench_device.py --rounds "
                f"{args.rounds}{flags}` (CPU and neuron interleaved in it; medians of rounds); "
                f"{args.alternations} processes per tree, the trees alternating. 1-min load before each "
                f"process: this {loads['this']}, baseline {loads['baseline']}.")
    for workload in dict.fromkeys(w for w, _ in ratios):
        for arm in trees:
            runs = ratios.get((workload, arm), [])
            if runs:
                run.row(workload=workload, tree=arm, ratio=statistics.median(runs), runs=runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-100m", action="store_true")
    parser.add_argument("--cpu-time", action="store_true", help="process CPU time on one thread, not wall time")
    parser.add_argument("--baseline", type=Path, help="another neuronkit checkout (extension built) to compare with")
    parser.add_argument("--alternations", type=int, default=3, help="processes per tree with --baseline")
    args = parser.parse_args()
    if args.baseline:
        against_baseline(args, " --skip-100m" * args.skip_100m + " --cpu-time" * args.cpu_time)
        return
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
        torch.set_num_threads(1)
    torch.manual_seed(0)
    flags = " --skip-100m" * args.skip_100m + " --cpu-time" * args.cpu_time
    with Run("device", "Simulated device overhead", f"python bench/bench_device.py --rounds {args.rounds}{flags}") as run:
        run.columns(workload="workload", cpu=("CPU", "{:.1f}"), neuron=("simulated neuron", "{:.1f}"),
                    unit="unit", ratio=("ratio", "{:.2f}x"))
        run.note = (f"CPU and neuron calls interleaved one by one (`neuronkit.timing.interleaved_medians`) after 2 "
                    f"warm-up calls per arm; each round the median of its runs (15 for tiny, 3 for 100M), the figure "
                    f"the median over {args.rounds} rounds; {'process CPU time, 1 thread' if args.cpu_time else 'wall time'}"
                    f", {torch.get_num_threads()} threads.")
        tiny = AutoModelForCausalLM.from_pretrained(DATA / "tiny-qwen3")
        per_op(run, args.rounds)
        compare(run, "tiny-qwen3", tiny, seq=64, batch=4, runs=15, rounds=args.rounds)
        compare(run, "tiny-qwen3", tiny, seq=32, batch=1, runs=15, rounds=args.rounds, kinds=("forward",))
        if not args.skip_100m:
            config = AutoConfig.from_pretrained(DATA / "qwen3-100m")
            big = AutoModelForCausalLM.from_config(config)
            compare(run, "qwen3-100m", big, seq=128, batch=1, runs=3, rounds=args.rounds)


if __name__ == "__main__":
    main()
