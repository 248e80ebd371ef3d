"""Op-audit cost: recorder overhead over a plain forward, and a weightless 8B audit's time and memory.

1. Overhead: the bundled ~100M-parameter Qwen3 config with random weights; a plain no-grad forward
   against `neuronkit.audit(model, inputs)` on the same inputs (report building included), at the
   audit's default 16 tokens (the worst case: least compute per op) and at 128. Rounds interleave the
   two so machine noise hits both alike; the figure is the ratio of the medians. Target: <= 1.5x.
2. Weightless 8B: a Llama-3-8B-sized config.json audited without weights, forward and forward +
   backward + optimizer step, each in a fresh Python whose peak RSS (`resource.getrusage`) includes
   importing torch and transformers. Targets: <= 60 s and <= 2 GB.

    python bench/bench_audit.py [--rounds 11] [--seq-len 16 128]

It writes bench/results/audit-8b.json and audit-overhead.json (bench/harness.py); `python
bench/make_results.py` puts them in RESULTS.md.
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

from harness import Run

os.environ.setdefault("HF_HUB_OFFLINE", "1")

LLAMA_8B = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
    "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
}
# Runs in a fresh interpreter so its peak RSS is the weightless audit's alone.
_CHILD = """
import json, resource, sys, time
start = time.perf_counter()
from neuronkit.op_audit import audit
imported = time.perf_counter()
report = audit(sys.argv[1], backward=sys.argv[2] == "train", optimizer_step=sys.argv[2] == "train")
done = time.perf_counter()
print(json.dumps({"audit_s": done - imported, "process_s": done - start, "calls": report.summary.total_calls,
                  "distinct_ops": report.summary.distinct_ops, "parameters": report.model.num_parameters,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def overhead(rounds: int, seq_lens: list[int]) -> list[dict]:
    """Median plain-forward, empty-modes and audit times (ms) on the ~100M config with random weights."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from neuronkit import inputs as example, models
    from neuronkit.op_audit import audit

    class EmptyDispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class EmptyFunction(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    config = models.load_config("qwen3-100m")
    model = models.load_model("qwen3-100m", weights=False)
    results = []
    for seq_len in seq_lens:
        inputs = example.example_inputs(config, seq_len=seq_len)
        inputs.pop("labels")

        def plain() -> None:
            with torch.no_grad():
                model(**inputs)

        def empty_modes() -> None:  # PyTorch's own cost of the two Python modes: the floor for any recorder
            with torch.no_grad(), EmptyFunction(), EmptyDispatch():
                model(**inputs)

        def audited() -> None:
            audit(model, inputs)

        arms = {"plain": plain, "modes": empty_modes, "audit": audited}
        for fn in arms.values():  # warm-up
            fn()
        samples: dict[str, list[float]] = {name: [] for name in arms}
        for _ in range(rounds):
            for name, fn in arms.items():
                start = time.perf_counter()
                fn()
                samples[name].append((time.perf_counter() - start) * 1e3)
        ms = {name: statistics.median(values) for name, values in samples.items()}
        results.append({"parameters": sum(p.numel() for p in model.parameters()), "seq_len": seq_len,
                        "rounds": rounds, "plain_ms": ms["plain"], "modes_ms": ms["modes"], "audit_ms": ms["audit"],
                        "ratio": ms["audit"] / ms["plain"], "calls": audit(model, inputs).summary.total_calls,
                        "torch": torch.__version__})
    return results


def weightless_8b(phase: str) -> dict:
    """Time and peak RSS of a weightless audit of the 8B config, in a fresh Python."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(LLAMA_8B))
        out = subprocess.run([sys.executable, "-c", _CHILD, tmp, phase], capture_output=True, text=True,
                             check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


NOTE = ("The overhead is per op call (a Python dispatch mode, a function mode and module hooks), so it is largest "
        "when ops do least work. \"Empty modes\" is the same forward under a TorchDispatchMode and a TorchFunctionMode "
        "that only pass calls through: PyTorch's own cost, the floor for any recorder of this kind. Target <= 1.5x.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--seq-len", type=int, nargs="+", default=[16, 128])
    args = parser.parse_args()
    # The 8B children first, while this process is small: Linux hands a child the parent's peak RSS
    # through fork/exec, so ru_maxrss would otherwise report this process's 100M model.
    with Run("audit-8b", "Op audit: weightless Llama-3-8B", "python bench/bench_audit.py") as run:
        run.columns(phase="phase", parameters=("parameters", "{:,}"), calls=("op calls", "{:,}"),
                    audit_s=("audit", "**{:.1f} s**"), process_s=("with imports", "{:.1f} s"),
                    peak_rss_gb=("peak RSS", "**{:.2f} GB**"))
        run.note = ("A Llama-3-8B-sized config.json audited without weights, each phase in a fresh Python whose peak "
                    "RSS includes importing torch and transformers. Targets: <= 60 s and <= 2 GB.")
        for label, phase in (("forward", "forward"), ("forward + backward + AdamW step", "train")):
            r = weightless_8b(phase)
            run.row(phase=label, parameters=r["parameters"], calls=r["calls"], audit_s=r["audit_s"],
                    process_s=r["process_s"], peak_rss_gb=r["peak_rss_bytes"] / 1e9)
    command = f"python bench/bench_audit.py --rounds {args.rounds} --seq-len {' '.join(map(str, args.seq_len))}"
    with Run("audit-overhead", "Op audit: recorder overhead", command) as run:
        run.columns(seq_len="tokens (batch 1)", calls=("op calls", "{:,}"), plain_ms=("plain forward", "{:.0f} ms"),
                    modes_ms=("empty modes", "{:.0f} ms"), audit_ms=("audit", "{:.0f} ms"),
                    ratio=("audit / plain", "**{:.2f}x**"))
        run.note = (f"qwen3-100m with random weights, forward, medians of {args.rounds} interleaved rounds. " + NOTE)
        for over in overhead(args.rounds, args.seq_len):
            run.row(**{key: over[key] for key in ("seq_len", "calls", "plain_ms", "modes_ms", "audit_ms", "ratio")})


if __name__ == "__main__":
    main()
