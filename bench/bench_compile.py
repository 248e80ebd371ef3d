"""torch.compile on the simulated `neuron` device: first-call compile time, and compiled vs eager
steady-state step time (forward under no_grad; training step = forward + backward + AdamW).

Each model is compiled once with `backend="neuron"`; the first compiled call of each workload is timed
on its own (Dynamo trace + AOTAutograd + the backend's graph checks). Steady state then interleaves
eager and compiled calls (`neuronkit.timing.interleaved_medians`) in several rounds and reports
the median of the rounds' medians. Models: the bundled tiny-qwen3 and the ~100M qwen3 config with
random weights.

    python bench/bench_compile.py [--rounds 5] [--skip-100m] [--write bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import neuronkit.graph_compile  # noqa: E402,F401 - backend="neuron"
from neuronkit.checks.parity import RECOMPILE_LIMIT, short_break_reason  # noqa: E402
from neuronkit.graph_compile.compare import to_device  # noqa: E402
from neuronkit.timing import interleaved_medians, timed  # noqa: E402
from neuronkit.models import load_model  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
SECTION = "## Compile"


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


def measure(name: str, spec: str, seq: int, batch: int, runs: int, rounds: int) -> list[dict]:
    model, _ = to_device(load_model(spec, weights=spec == "tiny-qwen3"), "neuron")
    ids = torch.randint(0, model.config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(0))
    ids = ids.to("neuron")
    torch._dynamo.reset()
    eager = workloads(model, ids)
    compiled_model = torch.compile(model, backend="neuron", options={"model_name": name},
                                   recompile_limit=RECOMPILE_LIMIT)
    compiled = workloads(compiled_model, ids)
    rows = []
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
        rows.append({"model": name, "kind": kind, "batch": batch, "seq": seq, "first_s": first_s,
                     "graphs": sum(r["kind"] == "forward" for r in records),
                     "neffs": len(records), "breaks": sum(counters["graph_break"].values()) - breaks_before,
                     "eager_ms": e, "compiled_ms": c, "ratio_range": (min(ratios), max(ratios)),
                     "rounds": rounds, "runs": runs})
        print(format_row(rows[-1]), flush=True)
    return rows


HEADER = ("| model | workload | first compiled call | graphs (fwd) / NEFFs | graph breaks | eager ms | "
          "compiled ms | compiled / eager (range over rounds) |\n|---|---|---|---|---|---|---|---|")


def format_row(r: dict) -> str:
    low, high = r["ratio_range"]
    return (f"| {r['model']} | {r['kind']} (batch {r['batch']}, seq {r['seq']}) | {r['first_s']:.1f} s | "
            f"{r['graphs']} / {r['neffs']} | {r['breaks']} | {r['eager_ms']:.1f} | {r['compiled_ms']:.1f} | "
            f"{r['compiled_ms'] / r['eager_ms']:.2f}x ({low:.2f}-{high:.2f}) |")


def break_reasons() -> list[str]:
    """The graph breaks Dynamo counted in this process, most frequent first, one line each."""
    grouped: Counter[str] = Counter()
    for reason, count in counters["graph_break"].items():
        grouped[short_break_reason(reason)] += count
    return [f"{count}x {reason}" for reason, count in grouped.most_common()]


def section(rows: list[dict], elapsed_s: float, load: tuple[float, float, float]) -> str:
    rounds = sorted({f"{r['rounds']} rounds x {r['runs']} runs" for r in rows})
    lines = [
        SECTION, "",
        "`python bench/bench_compile.py`: `torch.compile(model, backend=\"neuron\")` against eager on the simulated",
        "device. \"First compiled call\" is the first call of that workload on the compiled model (Dynamo trace,",
        "AOTAutograd, the backend's policy checks and NEFF accounting, plus one execution); the training step's",
        "first call recompiles the forward with gradients and compiles the backward (a small module is compiled",
        "first, so no model pays the process's one-time compiler warm-up). \"graphs (fwd) / NEFFs\" counts",
        "the forward graphs and all graphs (forward + backward) the backend compiled for that workload. Steady",
        "state: eager and compiled calls interleaved, medians per round, median over rounds "
        f"({', '.join(rounds)});",
        "forward under `no_grad`, training step = forward + backward + AdamW.",
        f"Compiled with `recompile_limit={RECOMPILE_LIMIT}` as `neuronkit check` does: once graph breaks split a",
        "Hugging Face model, frames such as transformers' shared deprecation wrapper exceed Dynamo's default",
        "limit of 8 and would silently run eagerly.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} intra-op threads, Python {platform.python_version()}; "
        f"run {time.strftime('%Y-%m-%d')}, {elapsed_s:.0f} s in all, 1-minute load average "
        f"{load[0]:.1f} at the start and {os.getloadavg()[0]:.1f} at the end (a shared VM: read the ranges).",
        "",
        HEADER,
        *(format_row(r) for r in rows),
        "",
        "Graph breaks counted by Dynamo over the whole run (warm-up included):",
        "",
        *(f"- {line}" for line in break_reasons() or ["none"]),
        "",
        "On the simulator a compiled graph runs through the same per-op kernel as eager mode (one NEFF per graph",
        "in the cache statistics instead of one per op), so compiled/eager near 1x is Dynamo's guards and",
        "AOTAutograd's runtime wrappers against eager dispatch, not a prediction of Trainium's speed-up; the",
        "first-call times are what a migration pays per new input shape.",
        "",
    ]
    return "\n".join(lines)


def write_section(path: Path, text: str) -> None:
    """Replace this benchmark's section of RESULTS.md (or append it), leaving the others untouched."""
    current = path.read_text() if path.exists() else "# Benchmark results\n"
    start = current.find(f"\n{SECTION}\n")
    if start < 0:
        path.write_text(current.rstrip("\n") + "\n\n" + text)
        return
    end = current.find("\n## ", start + 1)
    rest = current[end + 1:] if end >= 0 else ""
    path.write_text(current[:start + 1] + text + ("\n" + rest if rest else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-100m", action="store_true")
    parser.add_argument("--write", type=Path, nargs="?", const=RESULTS, default=None, metavar="RESULTS.md",
                        help=f"replace the '{SECTION}' section of this file (default bench/RESULTS.md)")
    args = parser.parse_args()
    start, load = time.perf_counter(), os.getloadavg()
    warm_up_compiler()
    print(HEADER)
    rows = measure("tiny-qwen3", "tiny-qwen3", seq=32, batch=4, runs=15, rounds=args.rounds)
    if not args.skip_100m:
        rows += measure("qwen3-100m", "qwen3-100m", seq=128, batch=1, runs=3, rounds=args.rounds)
    if args.write is not None:
        write_section(args.write, section(rows, time.perf_counter() - start, load))


if __name__ == "__main__":
    main()
