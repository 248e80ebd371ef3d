"""Op-audit cost: recorder overhead over a plain forward, and a weightless 8B audit's time and memory.

1. Overhead: the bundled ~100M-parameter Qwen3 config with random weights; a plain no-grad forward
   against `neuronkit.audit(model, inputs)` on the same inputs (report building included), at the
   audit's default 16 tokens (the worst case: least compute per op) and at 128. Rounds interleave the
   two so machine noise hits both alike; the figure is the ratio of the medians. Target: <= 1.5x.
2. Weightless 8B: a Llama-3-8B-sized config.json audited without weights, forward and forward +
   backward + optimizer step, each in a fresh Python whose peak RSS (`resource.getrusage`) includes
   importing torch and transformers. Targets: <= 60 s and <= 2 GB.

    python bench/bench_audit.py [--rounds 11] [--seq-len 16 128] [--write]

`--write` puts the figures under "## Op audit" in bench/RESULTS.md, leaving other sections alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
HEADING = "## Op audit"
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


def markdown(overheads: list[dict], fwd: dict, train: dict) -> str:
    gb = 1e9
    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs, torch {overheads[0]['torch']}, "
               f"Python {platform.python_version()}")
    rows = [f"| audit overhead, qwen3-100m ({o['parameters'] / 1e6:.0f}M params, random weights), forward, "
            f"batch 1 x {o['seq_len']} tokens, {o['calls']} op calls | {o['audit_ms']:.0f} ms vs "
            f"{o['plain_ms']:.0f} ms plain = **{o['ratio']:.2f}x** (empty modes alone: {o['modes_ms']:.0f} ms; "
            f"medians of {o['rounds']} interleaved rounds) | <= 1.5x |" for o in overheads]
    rows += [f"| weightless Llama-3-8B config ({r['parameters'] / 1e9:.2f}B params), {label}, {r['calls']} op calls "
             f"| **{r['audit_s']:.1f} s** audit ({r['process_s']:.1f} s with imports), peak RSS "
             f"**{r['peak_rss_bytes'] / gb:.2f} GB** | <= 60 s, <= 2 GB |"
             for label, r in (("forward", fwd), ("forward + backward + AdamW step", train))]
    return "\n".join([
        HEADING,
        "",
        f"`python bench/bench_audit.py` ({time.strftime('%Y-%m-%d')}; {machine}; a VM shared with other jobs).",
        "",
        "| measurement | figure | target |",
        "|---|---|---|",
        *rows,
        "",
        "The overhead is per op call (a Python dispatch mode, a function mode and module hooks), so it is",
        "largest when ops do least work. \"Empty modes\" is the same forward under a TorchDispatchMode and a",
        "TorchFunctionMode that only pass calls through: PyTorch's own cost, the floor for any recorder of",
        "this kind. Peak RSS is the whole fresh process (`resource.getrusage`), imports of torch and",
        "transformers included.",
        "",
    ])


def write_section(section: str) -> None:
    """Replace (or append) the "## Op audit" section of RESULTS.md; other sections stay as they are."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\n"
    pattern = re.compile(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text.rstrip("\n") + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--seq-len", type=int, nargs="+", default=[16, 128])
    parser.add_argument("--write", action="store_true", help="update the Op audit section of bench/RESULTS.md")
    args = parser.parse_args()
    # The 8B children first, while this process is small: Linux hands a child the parent's peak RSS
    # through fork/exec, so ru_maxrss would otherwise report this process's 100M model.
    fwd = weightless_8b("forward")
    print(f"weightless 8B forward: {json.dumps(fwd)}")
    train = weightless_8b("train")
    print(f"weightless 8B train: {json.dumps(train)}")
    overheads = overhead(args.rounds, args.seq_len)
    for over in overheads:
        print(f"overhead: {json.dumps(over)}")
    section = markdown(overheads, fwd, train)
    print("\n" + section)
    if args.write:
        write_section(section)


if __name__ == "__main__":
    main()
