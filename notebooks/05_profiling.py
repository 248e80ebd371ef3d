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
# # 05 · Profiling: where the time goes on the device
#
# A model that runs correctly (02) and compiles (04) is ready to be made fast, and the first question is
# where its time goes. TorchNeuron plugs into the standard `torch.profiler`: `NeuronConfig` extends it
# with device and runtime capture, device activity is reported as `ProfilerActivity.PrivateUse1`, and
# `NeuronProfiler(...).export_trace` writes a trace for Neuron Explorer plus Parquet tables (per-op and
# per-engine metrics meant for scripts, or an agent, to analyse). This notebook runs that documented
# profiler recipe on your model's forward pass on `neuron` and plots the hottest ops.

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

device: str = "neuron"  # the NeuronCore to profile on, e.g. "neuron:0"
steps: int = 5          # profiled forward passes (and as many plain, timed ones to measure overhead)
warmup: int = 3         # unprofiled passes first: the docs ask for at least 3
top: int = 15           # ops kept in the stage record, by device time

# %%
from neuronkit.stages.profile import run as profile
from neuronkit.workbook import display, lesson, parameters, prerequisites

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size,
                    layers=layers, full_model=full_model, random_weights=random_weights)
prerequisites(params, "profile")  # a record this notebook needs is missing: it stops here
params

# %% [markdown]
# ## The profiler recipe
#
# This kernel loaded notebook 01's model once; the next cell takes it and the run's example inputs
# (without labels: the profile is of inference). The stage below moves the model back to the CPU.

# %%
from neuronkit.profiling.markers import hide_in_notebook
from neuronkit.pipeline.session import load

hide_in_notebook()  # kineto's two "USDT ... profiler_start/stop" lines on stderr, dropped from every later cell
subject = load(params)
net = subject.model  # notebook 01's model, shared by this kernel's cells and its stage
inputs = {name: tensor for name, tensor in subject.inputs.items() if name != "labels"}
OUTPUT_DIR = str(params.run.artifact_dir("profile"))  # the run's profile directory

# %% [markdown]
# The profiler recipe, on your model. `warmup` unprofiled passes first, so that first-call NEFF
# compilation never shows up as a hot spot; then a profile of `steps` passes. `NeuronConfig` adds the device
# and the runtime to the standard profiler, `ProfilerActivity.PrivateUse1` is the device's activity, and
# `NeuronProfiler(...).export_trace` writes the trace for Neuron Explorer (PyTorch's Chrome trace with a
# device track added) and the Parquet tables when the profile closes. `key_averages()` aggregates the
# profile by op; in its table each op appears twice: `aten::…` is the op as PyTorch dispatched it (its
# host time), `nc_exec[aten::…]` its NEFF executing on the NeuronCore (its device time), so ten rows are
# five ops.

# %% tags=["copy"]
import torch
from torch.profiler import ProfilerActivity
from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode

net = net.to(device)
batch = {name: tensor.to(device) for name, tensor in inputs.items()}
with torch.no_grad():
    for _ in range(warmup):
        net(**batch)
    nc = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir=OUTPUT_DIR,
                      capture_enabled_for_nc="0", correlate_device_time=True)
    neuron_profiler = NeuronProfiler(nc)
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                experimental_config=nc, on_trace_ready=neuron_profiler.export_trace) as prof:
        for _ in range(steps):
            net(**batch)

print(prof.key_averages().table(sort_by="self_privateuse1_time_total", row_limit=10, max_name_column_width=30,
                                time_unit="ms"))

# %% [markdown]
# The same aggregation, four columns, and the device time op by op:

# %% tags=["copy"]
import matplotlib.pyplot as plt
import pandas as pd

ops = pd.DataFrame([{"op": e.key, "calls": e.count, "host ms": e.self_cpu_time_total / 1e3,
                     "device ms": e.self_device_time_total / 1e3} for e in prof.key_averages()
                    if not e.key.startswith("nc_exec[")])
print(ops.nlargest(8, "device ms").round(3).to_string(index=False))

hot = sorted((e for e in prof.key_averages() if not e.key.startswith("nc_exec[") and e.self_device_time_total),
             key=lambda e: e.self_device_time_total, reverse=True)[:10][::-1]
fig, ax = plt.subplots(figsize=(6, 3.2))
ax.barh([e.key.removeprefix("aten::")[:40] for e in hot], [e.self_device_time_total / 1e3 for e in hot],
        color="#0969da")
ax.set_xlabel("self device time, ms (simulated: host execution)")
ax.set_title(f"Top ops by device time, {steps} forward passes")
plt.show()

# %% [markdown]
# On the simulator the "device" time is the host executing each op: read the ranking, not the numbers.
# On Trainium the same recipe captures the NeuronCore itself, and the profile directory opens in Neuron
# Explorer, which links each event to its source line.
#
# ## Verify and record
#
# `profile.run` keeps the profile the recipe above took (the trace and the Parquet tables it wrote to
# `run_dir/artifacts/profile/`), adds a roofline estimate per op from Trainium2's published peak FLOP/s
# and HBM bandwidth (`est_trn2_us`, and `bound`: compute or memory), measures the profiler's own overhead
# against `steps` plain passes, and records `stages/05_profile.json`.

# %% tags=["stage"]
result = profile.run(params, device=device, steps=steps, warmup=warmup, top=top, profiled=neuron_profiler)
ev = result.evidence
lesson.key_numbers({
    "distinct ops": ev.distinct_ops,
    "hottest op": ev.top_ops[0].name.removeprefix("aten::") if ev.top_ops else "—",
    "CPU fallbacks": len(ev.fallbacks),
    "profiler overhead": f"{ev.overhead.ratio:.2f}×" if ev.overhead.ratio else "—",
    "profile": "yours, kept" if ev.profiled_by_caller else "taken by the stage",
})

# %% [markdown]
# The Parquet tables are the raw material: one row per op execution, ready for pandas (or for an agent
# hunting for bottlenecks). The five ops with the most device time in the stage's profile:

# %%
if ev.parquet_path:
    events = pd.read_parquet(ev.parquet_path)
    per_op = events.groupby("name")["duration_ns"].agg(["count", "sum"]).nlargest(5, "sum")
    print(per_op.assign(total_ms=(per_op["sum"] / 1e6).round(3)).drop(columns="sum").to_string())

# %%
lesson.folded(display.show(result), f"Full record: profile {result.status} — {result.summary}")

# %% [markdown]
# - **CPU fallbacks** ran on the host and copied `bytes_copied` across on every call: the first thing to
#   remove when a fallback op ranks high.
# - **Profiler overhead** compares profiled and plain step times: far above 1, the profile distorts
#   short ops.
# - Open `trace.json` (its path is in the record) in Perfetto (ui.perfetto.dev) or `chrome://tracing`.
#
# ## A CPU fallback, as the profile shows it
#
# `generate()` turns the last position's logits into probabilities, picks the next token with `argmax`
# and checks it against the stop tokens with `isin` (below on your model's own output: its logits, or the
# first output of a model without a head). `softmax` runs on the NeuronCore; `argmax` and
# `isin` have no Neuron lowering in this release, so they fall back to the CPU: their inputs go to the
# host and their results come back, on every decoding step. Profile one step's bookkeeping with the
# recipe above:

# %% tags=["copy"]
import torch_neuronx

net = net.to(device)  # the stage above moved it back to the CPU
with torch.no_grad():
    out = net(**batch)
logits = out.logits if out.get("logits") is not None else out[0]  # a base model: its hidden states
logits = logits[:, -1] if logits.dim() == 3 else logits  # the last position of a sequence
stop_tokens = torch.tensor([0, 1], device=device)
torch_neuronx.clear_op_tracking()
with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                            experimental_config=nc, on_trace_ready=NeuronProfiler(nc).export_trace) as step_prof:
    probabilities = logits.softmax(-1)
    next_token = logits.argmax(-1)
    finished = torch.isin(next_token, stop_tokens)
print("fell back to the CPU:", ", ".join(sorted(torch_neuronx.get_fallback_ops())) or "nothing")
print(step_prof.key_averages().table(sort_by="cpu_time_total", row_limit=6, max_name_column_width=24,
                                     time_unit="us"))

# %% [markdown]
# `softmax` has its `nc_exec[…]` row and device time; the two fallbacks have none (nothing of theirs ran
# on the NeuronCore), only host time, which grows with the tensors they copy. Inside a model's forward
# that is the first thing to remove; in `generate()`'s loop it is a few small tensors per token.
#
# Without `NeuronConfig` and its `on_trace_ready` handler, `torch.profiler` sees the host side alone, and
# `prof.export_chrome_trace(path)` writes PyTorch's own trace (a profile's trace is saved once, which is
# what `NeuronProfiler.export_trace` does with the device track added):

# %% tags=["copy"]
with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as host_prof:
    next_token = logits.argmax(-1)
host_prof.export_chrome_trace(f"{OUTPUT_DIR}/decode_step_host.json")
print("host-only trace:", f"{OUTPUT_DIR}/decode_step_host.json")

# %% [markdown]
# ## Try it
#
# Profile a training step instead of inference: keep the `labels` in the batch, call
# `net(**batch).loss.backward()` inside the profiler, and see which backward ops take the device time.
#
# ## Recap
#
# - Warm up first, then profile with `torch.profiler` plus `NeuronConfig`; `key_averages()` ranks the ops,
#   `export_chrome_trace` and `NeuronProfiler` write traces to open.
# - On the simulator read the ranking, not the times.
# - A CPU fallback shows as an op with no device row and copies around it.
#
# ## Next

# %%
lesson.next_step(result)

# %% jupyter={"source_hidden": true} tags=["nbval-check-output", "remove-cell"]
# CI's nbval check (hidden, shows nothing here): facts that depend only on the model and the parameters
display.checked(display.summary(result))
