"""torch.compile on the simulated `neuron` device: first-call compile time, and compiled vs eager
steady-state step time (forward under no_grad; training step = forward + backward + AdamW).

Each model is compiled once with `backend="neuron"`; the first compiled call of each workload is timed
on its own (Dynamo trace + AOTAutograd + the backend's graph checks). Steady state then interleaves
eager and compiled calls (`neuronkit.timing.interleaved_medians`) in several rounds and reports
the median of the rounds' medians. Models: the bundled tiny-qwen3 and the ~100M qwen3 config with
random weights.

    python bench/bench_compile.py [--rounds 5] [--skip-100m]

It writes bench/results/compile.json (bench/harness.py); `python bench/make_results.py` puts it in RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections import Counter
from typing import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import neuronkit.graph_compile  # noqa: E402,F401 - backend="neuron"
from neuronkit.stages.compile.steps import RECOMPILE_LIMIT, short_break_reason  # noqa: E402
from neuronkit.graph_compile.compare import to_device  # noqa: E402
from harness import Run, interleaved_medians, timed  # noqa: E402
from neuronkit.models import load_model  # noqa: E402


def workloads(model: torch.nn.Module, ids: torch.Tensor) -> dict[str, Callable[[], None]]:
    """Forward (no_grad) and training step on `model`, which may be the compiled wrapper."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def forward() -> None:
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)

    def train_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
        optimizer.step()

    return {"forward": forward, "train_step": train_step}


def warm_up_compiler() -> None:
    """Compile a small module first: the first compile in a process also pays Dynamo's and AOTAutograd's
    one-time imports and caches, which would otherwise be billed to the first model measured."""
    layer = torch.nn.Linear(8, 8).to("neuron")
    torch.compile(layer, backend="neuron")(torch.ones(2, 8, device="neuron")).sum().backward()


def measure(run: Run, name: str, spec: str, seq: int, batch: int, runs: int, rounds: int) -> None:
    model, _ = to_device(load_model(spec, weights=spec == "tiny-qwen3"), "neuron")
    ids = torch.randint(0, model.config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(0))
    ids = ids.to("neuron")
    torch._dynamo.reset()
    eager = workloads(model, ids)
    compiled_model = torch.compile(model, backend="neuron", options={"model_name": name},
                                   recompile_limit=RECOMPILE_LIMIT)
    compiled = workloads(compiled_model, ids)
    for kind in ("forward", "train_step"):
        metrics_before = len(torch.neuron.get_dynamo_metrics())
        breaks_before = sum(counters["graph_break"].values())
        _, first_s = timed(compiled[kind])
        records = torch.neuron.get_dynamo_metrics()[metrics_before:]
        per_round = {"eager": [], "compiled": []}
        for _ in range(rounds):
            medians = interleaved_medians({"eager": eager[kind], "compiled": compiled[kind]}, runs=runs)
            for arm, value in medians.items():
                per_round[arm].append(value)
        e, c = statistics.median(per_round["eager"]), statistics.median(per_round["compiled"])
        ratios = [rc / re for re, rc in zip(per_round["eager"], per_round["compiled"])]
        run.row(model=name, workload=f"{kind} (batch {batch}, seq {seq})", first_s=first_s,
                graphs=sum(r.kind == "forward" for r in records), neffs=len(records),
                breaks=sum(counters["graph_break"].values()) - breaks_before, eager_ms=e, compiled_ms=c,
                ratio=c / e, low=min(ratios), high=max(ratios))


def break_reasons() -> list[str]:
    """The graph breaks Dynamo counted in this process, most frequent first, one line each."""
    grouped: Counter[str] = Counter()
    for reason, count in counters["graph_break"].items():
        grouped[short_break_reason(reason)] += count
    return [f"{count}x {reason}" for reason, count in grouped.most_common()]


NOTE = ("`torch.compile(model, backend=\"neuron\")` against eager on the simulated device. \"First compiled call\" is "
        "the first call of that workload on the compiled model (Dynamo trace, AOTAutograd, the backend's policy "
        "checks and NEFF accounting, plus one execution); the training step's first call recompiles the forward "
        "with gradients and compiles the backward (a small module is compiled first, so no model pays the "
        "process's one-time compiler warm-up). \"graphs (fwd)\" and \"NEFFs\" count the forward graphs and all "
        "graphs (forward + backward) the backend compiled for that workload. Steady state: eager and compiled "
        "calls interleaved, medians per round, median over rounds; forward under `no_grad`, training step = "
        f"forward + backward + AdamW. Compiled with `recompile_limit={RECOMPILE_LIMIT}` as `neuronkit check` "
        "does. On the simulator a compiled graph runs through the same per-op kernel as eager mode, so "
        "compiled/eager near 1x is Dynamo's guards and AOTAutograd's wrappers against eager dispatch, not a "
        "prediction of Trainium's speed-up; the first-call times are what a migration pays per new input shape.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-100m", action="store_true")
    args = parser.parse_args()
    command = f"python bench/bench_compile.py --rounds {args.rounds}{' --skip-100m' * args.skip_100m}"
    with Run("compile", "Compile", command) as run:
        run.columns(model="model", workload="workload", first_s=("first compiled call", "{:.1f} s"),
                    graphs="graphs (fwd)", neffs="NEFFs", breaks="graph breaks", eager_ms=("eager ms", "{:.1f}"),
                    compiled_ms=("compiled ms", "{:.1f}"), ratio=("compiled / eager", "{:.2f}x"),
                    low=("lowest round", "{:.2f}x"), high=("highest round", "{:.2f}x"))
        warm_up_compiler()
        measure(run, "tiny-qwen3", "tiny-qwen3", seq=32, batch=4, runs=15, rounds=args.rounds)
        if not args.skip_100m:
            measure(run, "qwen3-100m", "qwen3-100m", seq=128, batch=1, runs=3, rounds=args.rounds)
        breaks = "; ".join(break_reasons()) or "none"
        run.note = NOTE + f" Graph breaks counted by Dynamo over the whole run (warm-up included): {breaks}."


if __name__ == "__main__":
    main()
