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
# # 03 · Op audit: the ATen ops your model runs, and what Neuron does with each
#
# Every PyTorch model ends up as a stream of ATen operators (`aten::mm`, `aten::softmax`, ...).
# TorchNeuron lowers each op to StableHLO and compiles it with neuronx-cc into a NEFF; an op without a
# Neuron lowering **falls back to the CPU** by default (correct, but a host round trip on every call), and
# a few features are **not supported** by the first release at all: sparse tensors, NestedTensor,
# dynamic or symbolic shapes, masks in `nn.MultiheadAttention`'s fast path (SDPA takes any mask),
# per-channel quantization, forward-mode AD. Some documented gaps run all the same: neg/conj views run,
# `torch.signal` windows decompose, bilinear/bicubic upsampling falls back to CPU. 64-bit dtypes are
# computed in 32 bit.
#
# This notebook lists the ops your model actually issues and classifies each one, so you learn what
# will fall back or block before you are on a rented instance.

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

training: bool = True   # also audit backward and one optimizer step (AdamW)
generate: bool = False  # also audit greedy generate() (causal LMs; runs on random weights, needs the memory)

# %%
from neuronkit.workbook import display, parameters, audit

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size)
params

# %% [markdown]
# ## How the audit works
#
# PyTorch's own dispatcher hook, `TorchDispatchMode`, sees every op a model issues without touching the
# model's code. This is the whole idea:
#
# ```python
# from torch.utils._python_dispatch import TorchDispatchMode
#
# class OpInventory(TorchDispatchMode):
#     def __init__(self):
#         self.seen = {}
#
#     def __torch_dispatch__(self, func, types, args=(), kwargs=None):
#         self.seen[str(func)] = self.seen.get(str(func), 0) + 1
#         return func(*args, **(kwargs or {}))
# ```
#
# `neuronkit.audit` does the same and adds what a migration needs: the module each op came from, the
# dtypes and shapes it saw, and a classification against the Neuron op-support policy that the
# simulated device and the compile backend share. It runs **weightless** (the model is built inside a
# `FakeTensorMode`: shapes and dtypes without storage), so a multi-billion-parameter checkpoint audits in
# seconds; `generate=True` needs real values and uses random weights.

# %%
result = audit.run(params, training=training, generate=generate)
display.show(result)

# %% [markdown]
# ## How to read it
#
# - **Native support by op and by call**: the share of distinct ops, and of calls, with a Neuron
#   lowering. A few fallback ops called once are cheap; a fallback inside every layer is a host round trip
#   per layer per step.
# - **Findings** carry a severity. *blocker*: it fails on the device; change the model
#   before migrating (the stage fails). *warn*: runs, at a cost (CPU fallback, recompiles); plan for it
#   (the stage warns). *info*: worth knowing, e.g. int64 indices computed in 32 bit.
# - Every finding names the module paths that issued the op and a **remedy**.
#
# The full op table and the findings follow. The audit JSON is also in `artifacts/audit/audit.json`.

# %%
ops = display.table(result.evidence.get("ops", []),
                    ["op", "calls", "classification", "category", "dtypes", "module_paths"])
ops

# %%
display.table(result.evidence.get("findings", []),
              ["severity", "category", "op", "calls", "module_paths", "remedy"])

# %% [markdown]
# ### Filter the op table
#
# In JupyterLab, pick a category or classification, or type part of a module path (say `mlp` or
# `layers.0`), to see only those ops. The table above is the same data, unfiltered.

# %%
display.filter_widget(ops, by=["category", "classification"], text_column="module_paths")

# %% [markdown]
# ## Next
#
# Blockers first: each remedy says what to change in the model. Then open **04_compile**: the ops that
# run natively in eager mode are the ones `torch.compile` can fuse into one graph.
#
# The last cell prints the facts CI checks with nbval (`# NBVAL_CHECK_OUTPUT`): the stage's status and the
# evidence that depends only on the model and the parameters, never on timings or paths.

# %%
# NBVAL_CHECK_OUTPUT
print(display.summary(result))
