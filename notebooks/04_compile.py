# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python (neuronkit)
#     language: python
#     name: neuronkit
# ---

# %% [markdown]
# # 04 · `torch.compile`: graphs instead of ops, and the shapes that recompile them
#
# Eager mode compiles and launches one NEFF per op. `torch.compile` with the `neuron` backend captures
# whole graphs: TorchDynamo traces the Python, AOTAutograd builds the forward and backward graphs ahead of
# time, the backend lowers each graph to StableHLO and neuronx-cc compiles one NEFF per graph (there is no
# Inductor). The documented rules that shape a migration:
#
# - `fullgraph=True` is recommended. A **graph break** splits the model into several graphs, each
#   compiled on its own, with Python running in between.
# - Shapes are static: `dynamic=True` is **rejected**, and every new input shape **recompiles**. Real
#   inputs of many lengths need padding into a few **buckets**.
# - `mode` accepts only `"default"`; other modes warn and fall back to it.
# - The first call pays the compilation; the NEFF cache makes later runs cheap.

# %% tags=["parameters"]
# Parameters. `neuronkit run` (papermill) injects its values in a cell right after this one;
# keep them literal: the next cell validates them and derives everything else.
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # load models from local files only, never from the Hub
os.environ.setdefault("TQDM_DISABLE", "1")    # no progress bars in executed notebooks

model: str = "tiny-qwen3"            # a bundled model (tiny-qwen3, tiny-bert) or your checkpoint directory
run_dir: str = "../runs/tiny-qwen3"  # this run's directory: every notebook of one run uses the same one
dtype: str = "float32"               # float32, bfloat16 or float16
seq_len: int = 16                    # tokens per example input
batch_size: int = 1                  # example inputs per batch
layers: int = 0                      # blocks of a layer slice to run (0: as many as fit the budget)
full_model: bool = False             # run the whole model, however large

device: str = "neuron"  # the NeuronCore to compile for, e.g. "neuron:0"
timing_runs: int = 5    # interleaved eager/compiled timings (medians)
prompts_file = None     # your prompts, one per line, for bucket advice (None: data/sample_prompts.txt)
max_buckets: int = 4    # at most this many bucket lengths, i.e. compilations

# %%
from neuronkit.workbook import display, lesson, parameters, torch_compile

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size,
                    layers=layers, full_model=full_model)
params

# %% [markdown]
# ## Compile, then call it with new shapes
#
# From the seed article: set the default backend once, before the first compilation
# (`torch.compiler.set_default_backend("neuron")`, then `model.compile()`), or name it in each call, as
# here. A small block is enough to see the two costs that matter: the first call pays the compilation,
# and every new input shape compiles again. `torch.neuron.get_dynamo_metrics()` lists each graph the
# backend compiled.

# %%
import time

import torch

torch.manual_seed(0)
block = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).to("neuron")
compiled = torch.compile(block, backend="neuron", fullgraph=True)

torch.neuron.reset_dynamo_metrics()
calls = []  # (sequence length, milliseconds, graphs compiled by this call)
with torch.no_grad():
    for length in (16, 16, 16, 8, 8, 32):
        x = torch.randn(1, length, 64).to("neuron")
        before, start = len(torch.neuron.get_dynamo_metrics()), time.perf_counter()
        compiled(x)
        torch.neuron.synchronize()
        calls.append((length, (time.perf_counter() - start) * 1e3, len(torch.neuron.get_dynamo_metrics()) - before))
for length, ms, new in calls:
    print(f"length {length:3}: {ms:8.1f} ms  {'compiled a new graph' if new else 'reused a compiled graph'}")

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 2.8))
ax.bar(range(len(calls)), [ms for _, ms, _ in calls],
       color=["#cf222e" if new else "#1a7f37" for _, _, new in calls])
ax.set_xticks(range(len(calls)), [f"len {length}" for length, _, _ in calls])
ax.set_yscale("log")
ax.set_ylabel("ms per call (host timing)")
ax.set_title("Red: the call compiled a graph. Green: it reused one")
plt.show()

# %% [markdown]
# On Trainium each red bar is a neuronx-cc compilation, seconds to minutes; on the simulator they are the
# host's tracing and lowering time. Read the pattern, not the numbers: the first call and every new
# length compile; a length seen before is served from the compiled graph (and from the NEFF cache on
# disk in a later process).
#
# ## Verify and record
#
# `torch_compile.run` does this on your model: it compiles it on `device`, runs a forward and backward
# pass against notebook 01's CPU reference, feeds a shorter input to count recompiles, and times eager
# against compiled. It then measures the token lengths of `prompts_file` and asks `suggest_buckets` how to
# bound the compilations they would cause. The record is `stages/04_compile.json`.

# %%
result = torch_compile.run(params, device=device, timing_runs=timing_runs, prompts_file=prompts_file,
                           max_buckets=max_buckets)
ev = result.evidence
lesson.key_numbers({
    "graphs": "—" if ev.graphs is None else ev.graphs,
    "graph breaks": len(ev.graph_breaks),
    "recompiles (shorter input)": "—" if ev.recompiles is None else ev.recompiles,
    "first call (host)": "—" if ev.compile_time_s is None else f"{ev.compile_time_s:.1f} s",
    "speed-up vs eager (host)": f"{ev.speedup:.2f}×" if ev.speedup else "—",
})

# %%
if ev.graph_breaks:
    display.table(ev.graph_breaks, ["reason", "where"])

# %% [markdown]
# - **Graphs and graph breaks**: one graph is the goal. Each break names its reason and the source line;
#   what the backend cannot lower (say, a higher-order op such as `torch.cond`) fails the compilation as
#   a lowering error naming the op.
# - **Recompiles**: the graphs a second, shorter input compiled, each a full compilation on Trainium.
# - **Times** are the host's on the simulator: read the ratio, and measure on Trainium before you trust
#   an absolute number. Parity (in the record) compares the compiled model with notebook 01's CPU reference.
#
# ## Buckets: fewer compilations for some padding
#
# Real prompts come in many lengths, and each length would compile. Padding every input up to the next
# of a few bucket lengths bounds the compilations at the cost of padding tokens. The trade-off for the
# sample prompts' lengths, with 1 to 8 buckets (`suggest_buckets`):

# %%
from neuronkit.graph_compile.buckets import suggest_buckets

plan = ev.buckets
if plan:
    options = [suggest_buckets(plan.lengths, k) for k in range(1, 9)]
    fig, ax = plt.subplots(figsize=(6, 2.8))
    ax.plot([o.compilations for o in options], [o.padding_overhead for o in options], "o-", color="#0969da")
    ax.plot([plan.distinct_shapes], [0], "s", color="#6e7781", label="no buckets")
    ax.plot([plan.compilations], [plan.padding_overhead], "*", markersize=14, color="#cf222e",
            label=f"recommended: {plan.buckets}")
    ax.set_xlabel("compilations")
    ax.set_ylabel("padding (% extra tokens)")
    ax.set_title(f"{len(plan.lengths)} prompts, {plan.distinct_shapes} distinct lengths")
    ax.legend()
    plt.show()
else:
    print("no bucket advice in the record (a model without a tokenizer has fixed-shape inputs: nothing to bucket)")

# %%
lesson.folded(display.show(result), f"Full record: compile {result.status} — {result.summary}")

# %% [markdown]
# ## Next

# %%
lesson.next_step(result)

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["nbval-check-output", "remove-cell"]
# CI's nbval check (folded away): facts that depend only on the model and the parameters
print(display.summary(result))
