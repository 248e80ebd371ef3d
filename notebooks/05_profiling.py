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
# per-engine metrics meant for scripts, or an agent, to analyse). This notebook runs the seed article's
# profiler recipe on your model's forward pass on `neuron` and plots the hottest ops.

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

device: str = "neuron"  # the NeuronCore to profile on, e.g. "neuron:0"
steps: int = 5          # profiled forward passes (and as many plain, timed ones to measure overhead)
warmup: int = 3         # unprofiled passes first: the docs ask for at least 3
top: int = 15           # ops kept in the stage record, by device time

# %%
from neuronkit.workbook import display, lesson, parameters, profile

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size,
                    layers=layers, full_model=full_model)
params

# %% [markdown]
# ## The profiler recipe
#
# The seed article's recipe, on the run's model and inputs. Run `warmup` unprofiled passes first, so that
# first-call NEFF compilation never shows up as a hot spot; then profile a few.

# %%
import torch
from torch.profiler import ProfilerActivity
from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode

from neuronkit.profiling.markers import without_trace_markers
from neuronkit.workbook.loading import load

OUTPUT_DIR = str(params.run.artifact_dir("profile"))

subject = load(params)
hot = []  # the ten ops with the most device time
with lesson.attempt("Profiling on neuron"):
    net = subject.model.to(device)
    batch = {name: t.to(device) for name, t in subject.inputs.items()}
    with torch.no_grad():
        for _ in range(warmup):
            net(**batch)
        nc = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir=OUTPUT_DIR,
                          capture_enabled_for_nc="0", correlate_device_time=True)
        # without_trace_markers: kineto (the profiler's engine) prints "USDT ... profiler_start/stop" on stderr;
        # only those two lines are dropped, its warnings and errors still show.
        with without_trace_markers(), torch.profiler.profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=nc,
                on_trace_ready=NeuronProfiler(nc).export_trace) as prof:
            for _ in range(2):
                net(**batch)
    print(prof.key_averages().table(sort_by="self_privateuse1_time_total", row_limit=4))
    hot = sorted((e for e in prof.key_averages() if not e.key.startswith("nc_exec[") and e.self_device_time_total),
                 key=lambda e: e.self_device_time_total, reverse=True)[:10][::-1]

# %% [markdown]
# Each op appears twice: `aten::…` is the op as PyTorch dispatched it, `nc_exec[aten::…]` its NEFF
# executing on the NeuronCore. The device time, op by op:

# %%
import matplotlib.pyplot as plt

if hot:
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.barh([e.key.removeprefix("aten::")[:40] for e in hot], [e.self_device_time_total / 1e3 for e in hot],
            color="#0969da")
    ax.set_xlabel("self device time, ms (simulated: host execution)")
    ax.set_title("Top ops by device time, 2 forward passes")
    plt.show()

# %% [markdown]
# On the simulator the "device" time is the host executing each op: read the ranking, not the numbers.
# On Trainium the same recipe captures the NeuronCore itself, and the profile directory opens in Neuron
# Explorer, which links each event to its source line.
#
# ## Verify and record
#
# `profile.run` runs the same recipe with more steps, adds a roofline estimate per op from Trainium2's
# published peak FLOP/s and HBM bandwidth (`est_trn2_us`, and `bound`: compute or memory), measures the
# profiler's own overhead against plain steps, and records `stages/05_profile.json`; the trace and the
# Parquet tables go to `run_dir/artifacts/profile/`.

# %%
result = profile.run(params, device=device, steps=steps, warmup=warmup, top=top)
ev = result.evidence
lesson.key_numbers({
    "distinct ops": ev.distinct_ops,
    "hottest op": ev.top_ops[0].name.removeprefix("aten::") if ev.top_ops else "—",
    "CPU fallbacks": len(ev.fallbacks),
    "profiler overhead": f"{ev.overhead.ratio:.2f}×" if ev.overhead.ratio else "—",
})

# %% [markdown]
# The Parquet tables are the raw material: one row per op execution, ready for pandas (or for an agent
# hunting for bottlenecks). The five ops with the most device time in the stage's profile:

# %%
import pandas as pd

if ev.parquet_path:
    events = pd.read_parquet(ev.parquet_path)
    per_op = events.groupby("name")["duration_ns"].agg(["count", "sum"]).nlargest(5, "sum")
    print((per_op.assign(total_us=(per_op["sum"] / 1e3).round(1)).drop(columns="sum")).to_string())

# %%
lesson.folded(display.show(result), f"Full record: profile {result.status} — {result.summary}")

# %% [markdown]
# - **CPU fallbacks** ran on the host and copied `bytes_copied` across on every call: the first thing to
#   remove when a fallback op ranks high.
# - **Profiler overhead** compares profiled and plain step times: far above 1, the profile distorts
#   short ops.
# - Open `trace.json` (its path is in the record) in Perfetto (ui.perfetto.dev) or `chrome://tracing`.
#
# ## Next

# %%
lesson.next_step(result)

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["nbval-check-output", "remove-cell"]
# CI's nbval check (folded away): facts that depend only on the model and the parameters
print(display.summary(result))
