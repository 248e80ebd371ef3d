"""Collective overhead of the `neuron` process group, and the wall time of the torchrun test jobs.

1. all_reduce / all_gather / reduce_scatter through the `neuron` process group on neuron tensors, against
   the same collective through a plain gloo group on CPU tensors, 2 ranks under torchrun, calls
   interleaved (`neuronkit.timing.interleaved_medians`), median of `--runs` calls per round, median of
   `--rounds` rounds. The ratio is what the simulator adds (host aliases, staging, the profiler range).
2. The wall time of each torchrun job the test suite launches (`launch.run`), start to finish.

It writes bench/results/distributed.json (bench/harness.py); `python bench/make_results.py` puts it in RESULTS.md.

    python bench/bench_distributed.py [--rounds 3 --runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import Run

SIZES = {"4 KiB": 1 << 10, "1 MiB": 1 << 18, "16 MiB": 1 << 22}  # float32 elements
JOBS = {  # the torchrun jobs of tests/test_distributed.py and notebook 07
    "2 ranks: 9 scenarios (tests)": dict(scenarios=["collectives", "ddp", "fsdp2", "tp", "sp", "pp", "dtensor",
                                                    "dcp", "compile"], nproc=2),
    "4 ranks: fsdp2_tp, all_to_all (tests)": dict(scenarios=["fsdp2_tp", "all_to_all"], nproc=4),
    "2 nodes x 1 rank: collectives (tests)": dict(scenarios=["collectives"], nproc=1, nnodes=2),
    "2 ranks: ddp, fsdp2 (notebook 07)": dict(scenarios=["ddp", "fsdp2"], nproc=2),
}


def child(rounds: int, runs: int) -> None:
    """One rank: time each collective both ways; rank 0 prints the medians as JSON."""
    import torch
    import torch.distributed as dist

    from neuronkit.timing import interleaved_medians

    dist.init_process_group()
    gloo = dist.new_group(backend="gloo")
    device = torch.device("neuron", torch.neuron.current_device())
    world = dist.get_world_size()
    rows = {}
    for label, n in SIZES.items():
        on_device, on_host = torch.ones(n, device=device), torch.ones(n)
        gathered_device, gathered_host = torch.empty(n * world, device=device), torch.empty(n * world)
        part_device, part_host = torch.empty(n // world, device=device), torch.empty(n // world)
        pairs = {
            "all_reduce": (lambda: dist.all_reduce(on_device), lambda: dist.all_reduce(on_host, group=gloo)),
            "all_gather": (lambda: dist.all_gather_single(gathered_device, on_device),
                           lambda: dist.all_gather_single(gathered_host, on_host, group=gloo)),
            "reduce_scatter": (lambda: dist.reduce_scatter_single(part_device, on_device),
                               lambda: dist.reduce_scatter_single(part_host, on_host, group=gloo)),
        }
        for kind, (neuron_fn, gloo_fn) in pairs.items():
            medians = [interleaved_medians({"neuron": neuron_fn, "gloo": gloo_fn}, runs=runs, warmup=2)
                       for _ in range(rounds)]
            rows[f"{kind} {label}"] = {k: statistics.median(m[k] for m in medians) for k in ("neuron", "gloo")}
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(rows))
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.rounds, args.runs)
        return
    from neuronkit.distributed.launch import free_port, run

    with Run("distributed", "Distributed", f"python bench/bench_distributed.py --rounds {args.rounds} --runs "
             f"{args.runs}") as run_log:
        run_log.columns(collective="collective, payload per rank / job",
                        neuron_ms=("`neuron` group, neuron tensors", "{:.3f} ms"),
                        gloo_ms=("gloo group, CPU tensors", "{:.3f} ms"), ratio=("ratio", "{:.2f}x"),
                        job_s=("wall time", "{:.1f} s"))
        measure(args, run, free_port, run_log)


def measure(args: argparse.Namespace, run: Any, free_port: Any, run_log: Run) -> None:
    """The collectives (a 2-rank torchrun child) and the built-in jobs, as rows of `run_log`."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
                          "--rdzv-backend=c10d", f"--rdzv-endpoint=localhost:{free_port()}", __file__, "--child",
                          "--rounds", str(args.rounds), "--runs", str(args.runs)],
                         capture_output=True, text=True, env=env, check=True)
    rows = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))[7:])
    jobs = {}
    for label, job in JOBS.items():
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            run(out=Path(tmp), timeout=600, **job)
            jobs[label] = time.perf_counter() - start
    run_log.note = ("2 ranks under torchrun; float32 tensors; median ms per call, calls interleaved. Then each "
                    "built-in torchrun job timed from launch to results.")
    for name, r in rows.items():
        run_log.row(collective=name, neuron_ms=r["neuron"], gloo_ms=r["gloo"], ratio=r["neuron"] / r["gloo"])
    for label, seconds in jobs.items():
        run_log.row(collective=f"torchrun job: {label} (launch to results)", job_s=seconds)


if __name__ == "__main__":
    main()
