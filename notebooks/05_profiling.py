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
# per-engine metrics meant for scripts, or an agent, to analyse). This notebook profiles the forward pass
# on `neuron` and lists the hottest ops.

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

device: str = "neuron"  # the NeuronCore to profile on, e.g. "neuron:0"
steps: int = 5          # profiled forward passes (and as many plain, timed ones to measure overhead)
warmup: int = 3         # unprofiled passes first: the docs ask for at least 3
top: int = 15           # ops kept in the stage record, by device time

# %%
from neuronkit.workbook import display, parameters, profile

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size)
params

# %% [markdown]
# ## The profiler recipe
#
# This is the documented recipe, and what `profile.run` runs for you after `warmup` iterations (so that
# first-call NEFF compilation never shows up as a hot spot):
#
# ```python
# from torch.profiler import ProfilerActivity
# from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode
#
# nc = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir=OUTPUT_DIR,
#                   capture_enabled_for_nc="0", correlate_device_time=True)
# with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
#                             experimental_config=nc, on_trace_ready=NeuronProfiler(nc).export_trace) as prof:
#     ...
# print(prof.key_averages().table(sort_by="self_privateuse1_time_total", row_limit=4))
# ```
#
# The trace and the Parquet tables go to `run_dir/artifacts/profile/`.

# %%
result = profile.run(params, device=device, steps=steps, warmup=warmup, top=top)
display.show(result)

# %% [markdown]
# ## How to read it
#
# - **Top ops** are sorted by device time. `est_trn2_us` is a roofline estimate from Trainium2's published
#   peak FLOP/s and HBM bandwidth, and `bound` says which of the two limits the op. On the simulator the
#   device time is the host executing the op: read the ranking and the bound, not the absolute numbers.
# - **CPU fallbacks** ran on the host and copied `bytes_copied` across on every call: the first thing to
#   remove when a fallback op ranks high.
# - **Overhead** compares profiled and plain step times: a ratio far above 1 means the profile distorts
#   short ops.
# - Open `trace.json` in Perfetto (ui.perfetto.dev) or `chrome://tracing`; on Trainium, the profile
#   directory opens in Neuron Explorer, which links each event to its source line.

# %%
display.table(result.evidence.get("top_ops", []))

# %% [markdown]
# The Parquet tables are the raw material: one row per op execution, ready for pandas (or for an agent
# hunting for bottlenecks).

# %%
import pandas as pd

events = pd.read_parquet(result.evidence["parquet_path"]) if "parquet_path" in result.evidence else None
events.head() if events is not None else "no profile: the stage did not run"

# %% [markdown]
# ## Next
#
# Open **06_report** for the verdict across all stages, rendered as a single `report.html`.
#
# The last cell prints the facts CI checks with nbval (`# NBVAL_CHECK_OUTPUT`): the stage's status and the
# evidence that depends only on the model and the parameters, never on timings or paths.

# %%
# NBVAL_CHECK_OUTPUT
print(display.summary(result))
