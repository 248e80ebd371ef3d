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
# # 02 · Eager on `neuron`: the one-line change, and are the answers still right?
#
# The PyTorch blog's migration is a single line, `model.to("neuron")`. In **eager mode** every ATen op is
# dispatched to the neuron backend as Python reaches it: lowered to StableHLO, compiled by neuronx-cc into
# a NEFF, and run. Each distinct op signature (op, shapes, dtypes, static arguments) compiles once and is
# then served from the **NEFF cache**, in memory and on disk (`TORCH_NEURONX_NEFF_CACHE_DIR`), so a second
# run starts warm. An op without a Neuron lowering **falls back to the CPU** silently: its tensors go to
# the host and back, and only `torch_neuronx.get_fallback_ops()` tells you. Eager mode runs op by op with
# every value inspectable: it is the debugging mode, and the first thing to get right.
#
# This notebook moves the model, runs the CPU baseline's inputs, and holds the device to the CPU: outputs
# within tolerance, the same top-1 tokens, the same greedy generation, and a few training steps with the
# same losses and gradient norms.

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

device: str = "neuron"    # the NeuronCore to run on, e.g. "neuron:0"
train_steps: int = 2      # SGD steps compared between CPU and neuron
generate_tokens: int = 8  # greedy tokens compared (causal LMs)

# %%
from neuronkit.workbook import display, parameters, eager

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size)
params

# %% [markdown]
# ## The one-line change
#
# The seed article's training loop; only the first line is new:
#
# ```python
# model = MyModel().to("neuron")   # the only change
# optimizer = torch.optim.AdamW(model.parameters())
# for batch in dataloader:
#     optimizer.zero_grad()
#     loss = criterion(model(batch), targets)
#     loss.backward()
#     optimizer.step()
# ```
#
# Hugging Face models can also load straight onto the device with `from_pretrained(path,
# device_map="neuron")`. On a toy layer, with the op tracking the backend keeps:

# %%
import torch
import torch_neuronx  # on the simulator: neuronkit's stand-in with the same tracking API

torch_neuronx.clear_op_tracking()
layer = torch.nn.Linear(4, 2).to("neuron")
y = layer(torch.randn(3, 4, device="neuron"))
print("output on:         ", y.device)
print("ran on the device: ", sorted(torch_neuronx.get_executed_ops()))
print("fell back to CPU:  ", sorted(torch_neuronx.get_fallback_ops()))

# %% [markdown]
# The layer's matmul ran on the device. Random-number ops (`torch.randn` lowers to `aten::normal_`) draw
# their numbers on the host in the pre-release backend, so expect them among the fallbacks: harmless
# here, worth knowing inside a training step.

# %% [markdown]
# ## The parity check
#
# `eager.run` calls `neuronkit check` with its eager, generate and train stages: it copies the
# model to the device, runs the same inputs as notebook 01 and compares every output with the CPU's.
# Tolerances follow `dtype`: float32 must match within 1e-4; bfloat16 and float16 run under
# `torch.autocast("neuron")` against the float32 CPU reference, with looser bounds. Training uses SGD
# rather than Adam, which would turn rounding-level gradient differences into full-size updates.

# %%
result = eager.run(params, device=device, train_steps=train_steps, generate_tokens=generate_tokens)
display.show(result)

# %% [markdown]
# ## How to read it
#
# - **Parity**: per output, the largest absolute error and the error relative to the output's largest
#   magnitude, against `atol`/`rtol`; **top-1 agreement** is the share of positions whose most likely
#   token is the same; **generate identical** says whether greedy decoding produced the same tokens.
# - **Training**: CPU and neuron losses and gradient norms step by step; `ok` when they agree within the
#   dtype's tolerance.
# - **CPU fallback ops** ran on the host. Each is a round trip per call: fine for a rare op, costly inside
#   every layer. Notebook 03 says where each one comes from.
# - **NEFF cache**: `misses` are compilations, `hits` reuse; `disk_hits` come from an earlier process. On
#   Trainium the misses are the slow part of a first run.
# - **Memory**: bytes allocated on the device against one core's HBM.
# - **Tied weights** stay tied on the device (the real backend allows CPU↔neuron shallow copies); the
#   check reports any group a model's own `.to()` unties.
#
# A `fail` here marks the model *blocked* in the report, and notebooks 04 and 05 are skipped: start from
# the output with the largest error. `NEURONKIT_STRICT=1` in the environment (before Python starts) makes
# every CPU fallback raise where it happens.

# %%
display.table(result.evidence.get("parity", {}).get("outputs", []),
              ["name", "shape", "max_abs_err", "max_rel_err", "atol", "rtol", "ok"])

# %% [markdown]
# ## Next
#
# Open **03_op_audit**: every op the model runs, classified, with the module that issued it.
#
# The last cell prints the facts CI checks with nbval (`# NBVAL_CHECK_OUTPUT`): the stage's status and the
# evidence that depends only on the model and the parameters, never on timings or paths.

# %%
# NBVAL_CHECK_OUTPUT
print(display.summary(result))
