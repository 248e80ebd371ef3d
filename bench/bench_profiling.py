"""Profiling overhead on the simulated neuron device: forward step time with no profiler, with PyTorch's
profiler alone, and with the Neuron recipe (NeuronConfig + NeuronProfiler.export_trace), plus the export.

Arms are interleaved round by round (plain, torch.profiler, Neuron recipe), so machine load drifts over all
three alike, and medians are reported. Each profiled round is its own profiling window around one step,
timed like gpt-fast (perf_counter bracketed by torch.neuron.synchronize()); the export (trace.json +
Parquet) is timed separately. Models: the bundled tiny-qwen3 and the ~100M-parameter Qwen3 config
(random weights, seeded).

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_profiling.py [--rounds 15] [--rounds-100m 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch
from torch.profiler import ProfilerActivity
from transformers import AutoConfig, AutoModelForCausalLM

from neuronkit.profiling import NeuronConfig, NeuronProfiler, ProfileMode
from neuronkit.resources import data_dir
from harness import Run, timed

MODELS = data_dir() / "models"
ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
WARMUP = 3


def load(name: str) -> torch.nn.Module:
    if name == "tiny-qwen3":
        return AutoModelForCausalLM.from_pretrained(MODELS / name)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(MODELS / name))


def timed_ms(step: Callable[[], object]) -> float:
    return timed(step)[1] * 1000


def bench(name: str, seq_len: int, rounds: int, out: Path) -> dict[str, float]:
    model = load(name).to("neuron").eval()
    ids = torch.randint(0, model.config.vocab_size, (1, seq_len)).to("neuron")

    def step() -> object:
        return model(input_ids=ids)

    plain, kineto, neuron, export = [], [], [], []
    with torch.no_grad():
        for _ in range(WARMUP):
            step()
        for _ in range(rounds):
            plain.append(timed_ms(step))
            with torch.profiler.profile(activities=ACTIVITIES, record_shapes=True):
                kineto.append(timed_ms(step))
            nc = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir=out,
                              correlate_device_time=True)
            prof = torch.profiler.profile(activities=ACTIVITIES, record_shapes=True, experimental_config=nc,
                                          on_trace_ready=NeuronProfiler(nc).export_trace)
            with prof:
                neuron.append(timed_ms(step))
                exit_start = time.perf_counter()
            export.append((time.perf_counter() - exit_start) * 1000)
    p, k, n = (statistics.median(v) for v in (plain, kineto, neuron))
    return {"plain_ms": p, "kineto_ms": k, "neuron_ms": n, "kineto_ratio": k / p, "neuron_ratio": n / p,
            "stop_and_export_ms": statistics.median(export), "rounds": rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds for tiny-qwen3")
    parser.add_argument("--rounds-100m", type=int, default=5, help="interleaved rounds for qwen3-100m")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: least noisy)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    command = (f"python bench/bench_profiling.py --rounds {args.rounds} --rounds-100m {args.rounds_100m} "
               f"--threads {args.threads}")
    with Run("profiling", "Profiling", command) as run, tempfile.TemporaryDirectory() as out:
        run.columns(model="model", seq_len="seq", rounds="rounds", plain_ms=("plain ms", "{:.1f}"),
                    kineto_ms=("torch.profiler ms", "{:.1f}"), kineto_ratio=("(x)", "{:.2f}x"),
                    neuron_ms=("Neuron recipe ms", "{:.1f}"), neuron_ratio=("(x)", "{:.2f}x"),
                    stop_and_export_ms=("stop+export ms", "{:.0f}"))
        run.note = (f"Arms interleaved round by round after {WARMUP} warm-up steps, medians; "
                    f"{torch.get_num_threads()} intra-op thread(s).")
        for name, seq_len, rounds in (("tiny-qwen3", 32, args.rounds), ("qwen3-100m", 64, args.rounds_100m)):
            run.row(model=name, seq_len=seq_len, **bench(name, seq_len, rounds, Path(out)))


if __name__ == "__main__":
    main()
