"""Simulated-device overhead: time on `neuron` over time on plain CPU, same model, same process.

CPU and neuron calls are interleaved (`neuronkit.timing.interleaved_medians`) so machine noise hits both
alike; each round takes the median of its runs and the figure is the median over rounds (gpt-fast's
discipline: warm up, then time with the device synchronized). Workloads: forward and training step (fwd +
bwd + AdamW) on the bundled tiny-qwen3 (batch 4 x 64 tokens; forward also at batch 1 x 32) and on a
~100M-parameter Qwen3 config with random weights; and the fixed cost of one op, an 8-element add (blocks of
2,000 calls, interleaved, microseconds per call). `--cpu-time` times this process's CPU time on one
thread instead of wall time, for a machine other jobs load (their CPU use then does not count).

    python bench/bench_device.py [--rounds 5] [--skip-100m] [--cpu-time]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-100m", action="store_true")
    parser.add_argument("--cpu-time", action="store_true", help="process CPU time on one thread, not wall time")
    args = parser.parse_args()
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
