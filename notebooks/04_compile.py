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
run_dir: str = ""                    # this run's directory ("": runs/<model name> at the repository root)
dtype: str = "float32"               # float32, bfloat16 or float16
seq_len: int = 16                    # tokens per example input
batch_size: int = 1                  # example inputs per batch
layers: int = 0                      # blocks of a layer slice to run (0: as many as fit the budget)
full_model: bool = False             # run the whole model, however large
random_weights: bool = False         # run a checkpoint without weights on random ones

device: str = "neuron"  # the NeuronCore to compile for, e.g. "neuron:0"
timing_runs: int = 5    # interleaved eager/compiled timings (medians)
prompts_file = None     # your prompts, one per line, for bucket advice (None: data/sample_prompts.txt)
max_buckets: int = 4    # at most this many bucket lengths, i.e. compilations

# %%
from neuronkit.workbook import display, lesson, parameters, prerequisites

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size,
                    layers=layers, full_model=full_model, random_weights=random_weights)
prerequisites(params, "compile")  # a record this notebook needs is missing: it stops here
params

# %% [markdown]
# ## Your model, compiled
#
# This kernel loads notebook 01's model once; the cells below move it to the device and compile it, and
# the stage after them runs that same model (one copy of the weights in memory, however large the model).
# The run's example batch has its labels. Hugging Face models run without their KV cache here: a training
# step sees the whole sequence at once.

# %%
from neuronkit.pipeline.session import load

subject = load(params)
net = subject.model  # notebook 01's model (the run's dtype), on the CPU until the next cell moves it
inputs = subject.inputs  # tensors by name: input_ids, attention_mask, labels, ...

# %% [markdown]
# `torch.compile(model, backend="neuron", dynamic=False)` returns a wrapper at once; nothing compiles
# until the first call. Then TorchDynamo traces `forward` into a graph, AOTAutograd builds its forward and
# backward graphs, and the backend compiles the forward one; the backward graph compiles when `backward()`
# first runs. A second call with the same shapes reuses both. `torch.neuron.get_dynamo_metrics()` lists
# each graph the backend compiled. `dynamic=False` is the form TorchNeuron's compile quickstart
# recommends: each new input shape is traced again with its own fixed sizes, never with symbolic ones.

# %% tags=["copy"]
import time

import torch

net = net.to(device)
batch = {name: tensor.to(device) for name, tensor in inputs.items()}
forward_options = {"use_cache": False} if getattr(net.config, "use_cache", None) is not None else {}  # no KV cache
compiled_model = torch.compile(net, backend="neuron", dynamic=False)  # static shapes, as TorchNeuron recommends

torch.neuron.reset_dynamo_metrics()
calls = []  # (call, forward seconds, backward seconds, graphs compiled during the call)
try:
    for call in ("first", "second"):
        before = len(torch.neuron.get_dynamo_metrics())
        start = time.perf_counter()
        out = compiled_model(**batch, **forward_options)
        loss = out.loss if out.get("loss") is not None else out[0].float().pow(2).mean()  # no labels: a surrogate
        torch.neuron.synchronize()
        forward_s = time.perf_counter() - start
        start = time.perf_counter()
        loss.backward()
        torch.neuron.synchronize()
        backward_s = time.perf_counter() - start
        net.zero_grad(set_to_none=True)
        calls.append((call, forward_s, backward_s, len(torch.neuron.get_dynamo_metrics()) - before))
except (RuntimeError, ValueError, torch._dynamo.exc.TorchDynamoException) as err:  # what compiling it raised
    reason = " ".join(str(err).split("\n\n")[0].split())  # its first paragraph, on one line
    print(f"torch.compile failed on this model: {reason}")

for call, forward_s, backward_s, new in calls:
    print(f"{call} call: forward {forward_s * 1e3:7.1f} ms, backward {backward_s * 1e3:7.1f} ms, "
          f"{new} graph(s) compiled")
for graph in torch.neuron.get_dynamo_metrics():
    print(f"  {graph['graph_name']:<18} {graph['graph_node_count']:5} FX nodes")

# %% tags=["copy"]
import matplotlib.pyplot as plt

if calls:  # the calls above ran
    fig, ax = plt.subplots(figsize=(6, 2.8))
    labels = [f"{call} {part}" for call, *_ in calls for part in ("forward", "backward")]
    seconds = [s for _, forward_s, backward_s, _ in calls for s in (forward_s, backward_s)]
    ax.bar(labels, [s * 1e3 for s in seconds], color=["#cf222e" if new else "#1a7f37" for *_, new in calls
                                                       for _ in range(2)])
    ax.set_yscale("log")
    ax.set_ylabel("ms (host timing)")
    ax.set_title("Red: the call compiled its graphs. Green: it reused them")
    plt.show()

# %% [markdown]
# On Trainium each red bar is a neuronx-cc compilation, seconds to minutes; on the simulator it is the
# host's tracing and lowering time. Read the pattern, not the numbers: the first call compiles, a call
# with shapes seen before is served from the compiled graphs (and from the NEFF cache on disk in a later
# process).
#
# ## Verify and record
#
# `torch_compile.run` takes over the compiled model this cell made: in a float32 run of the full model its
# graphs too; under autocast (bfloat16, float16, as notebook 02 runs) or on a layer slice (embeddings and
# head held fixed) it compiles the same model again. It holds the compiled forward and backward to
# notebook 01's CPU reference, feeds a shorter input to count recompiles, and times eager
# against compiled. It then measures the token lengths of `prompts_file` and asks `suggest_buckets` how to
# bound the compilations they would cause. The record is `stages/04_compile.json`.

# %% tags=["stage"]
from neuronkit.stages.compile import run as torch_compile

compiled = torch_compile.Compiled(compiled_model, calls[0][1], calls[0][2]) if calls else None  # None: it compiles
result = torch_compile.run(params, device=device, timing_runs=timing_runs, prompts_file=prompts_file,
                           max_buckets=max_buckets, compiled=compiled)
ev = result.evidence
lesson.key_numbers({
    "graphs": "—" if ev.graphs is None else ev.graphs,
    "graph breaks": len(ev.graph_breaks),
    "recompiles (shorter input)": "—" if ev.recompiles is None else ev.recompiles,
    "first call (host)": "—" if ev.compile_time_s is None else f"{ev.compile_time_s:.1f} s",
    "speed-up vs eager (host)": f"{ev.speedup:.2f}×" if ev.speedup else "—",
    "graphs from your cell": "reused" if ev.compiled_by_caller else "compiled again",
})

# %%
if ev.graph_breaks:
    display.table(ev.graph_breaks, ["reason", "where"])

# %% [markdown]
# - **Graphs and graph breaks**: one graph is the goal. Each break names its reason and the source line;
#   what the backend cannot lower (say, a higher-order op such as `torch.cond`) fails the compilation as
#   a lowering error naming the op.
# - **Recompiles**: the graphs a second, shorter input compiled, each a full compilation on Trainium.
# - **Times** are the host's on the simulator: the CPU running the simulated device, not Trainium, so
#   neither the times nor their ratio say how fast the compiled model will run there (notebook 07's cost
#   estimates do, within their band). Parity (in the record) compares the compiled model with notebook
#   01's CPU reference.
#
# ## Two rules, broken on purpose
#
# On a small module (milliseconds to compile). First the other way to choose the backend, which TorchNeuron's
# documentation also shows: set it once for the process, before the first compilation, then compile modules in place with
# `Module.compile()`. Then a **graph break**: a `print` in the middle of `forward` is Python the graph
# cannot hold, and `fullgraph=True` turns the break into an error.

# %% tags=["copy"]
torch.compiler.set_default_backend("neuron")  # torch.compile() and Module.compile() now use neuron


class Chatty(torch.nn.Module):
    """A layer that logs the shape of its activations."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        print(f"activations {tuple(y.shape)}")
        return torch.relu(y)


x = torch.randn(4, 64, device=device)
strict = Chatty().to(device)
strict.compile(fullgraph=True)
try:
    strict(x)
except torch._dynamo.exc.Unsupported as err:
    headline, explanation = str(err).splitlines()[:2]
    print(f"{type(err).__name__}: {headline}\n{explanation}")

torch.neuron.reset_dynamo_metrics()
relaxed = Chatty().to(device)
relaxed.compile()  # fullgraph=False: Dynamo splits forward at the break
relaxed(x)
print(f"without fullgraph=True: {len(torch.neuron.get_dynamo_metrics())} graphs, Python in between")

# %% [markdown]
# Without `fullgraph=True` Dynamo compiles the layer before the `print` and the one after it as two
# graphs, and runs the `print` in Python between them: two compilations, and on the device a return to
# the host in the middle of every call. The fix is to keep host work out of `forward` (log outside the
# model). `fullgraph=True` is the recommended setting because it makes every break an error you see at once.
#
# Second, **dynamic shapes**: `dynamic=True` asks Dynamo for one graph with symbolic sizes, and the
# backend refuses it, because a NEFF has fixed shapes. Dynamo reports what the backend raised:

# %% tags=["copy"]
dynamic = torch.compile(torch.nn.Linear(64, 64).to(device), dynamic=True)
try:
    dynamic(x)
except torch._dynamo.exc.BackendCompilerFailed as err:
    print(f"{type(err).__name__}: {str(err).split('. ')[0].strip()}.")

# %% [markdown]
# Keep `dynamic=False` (as in your model's cell above), and bound the shapes instead: every new input shape compiles one
# more graph, which is what buckets are for.
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
# ## Try it
#
# Call `compiled_model` with a batch of another length (`{name: t[:, :8] for name, t in batch.items()}`)
# and count the graphs in `torch.neuron.get_dynamo_metrics()`; then add `fullgraph=True` to your own
# model's `torch.compile` and see whether it holds.
#
# ## Recap
#
# - `torch.compile(model, backend="neuron", dynamic=False)` compiles on the first call, forward then
#   backward, and reuses the graphs for shapes it has seen.
# - A graph break splits the model (an error under `fullgraph=True`).
# - `dynamic=True` is refused, so bound the input shapes with a few padded buckets.
#
# ## Next

# %%
lesson.next_step(result)

# %% jupyter={"source_hidden": true} tags=["nbval-check-output", "remove-cell"]
# CI's nbval check (hidden, shows nothing here): facts that depend only on the model and the parameters
display.checked(display.summary(result))
