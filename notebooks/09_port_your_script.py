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
# # 09 · Port your script: find the CUDA in a training script, rewrite it, run it on `neuron`
#
# A team's migration is its training *code*, not only its checkpoint, and that code is full of CUDA:
# `.cuda()`, `torch.cuda.synchronize()`, `autocast("cuda")`, a GradScaler, `init_process_group("nccl")`,
# cuDNN flags. The article's promise is "change `.to('cuda')` to `.to('neuron')`"; `neuronkit port` checks
# what else your script needs, line by line.
#
# This lesson walks the bundled example, a plain PyTorch loop written for GPUs, through the three steps:
# **scan** (every CUDA-specific use, its category and remedy), **diff** (the mechanical rewrites) and **run**
# (the rewritten copy on the simulated device for a few optimizer steps). Point `script` at your own file to
# do the same with yours; the command line is `neuronkit port train.py [--diff] [--write OUT] [--run]`.
# It is a standalone lesson, not part of `neuronkit run` (which takes `--script train.py`).

# %% tags=["parameters"]
# Parameters (papermill can inject other values in a cell right after this one).
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # load models from local files only, never from the Hub
os.environ.setdefault("TQDM_DISABLE", "1")    # no progress bars in executed notebooks

script: str = ""           # your training script; "" = the bundled example (neuronkit/data/examples/train_cuda.py)
model: str = "tiny-qwen3"  # the checkpoint the example trains (a bundled name or a directory)
steps: int = 3             # optimizer steps of the run
nproc: int = 1             # processes (torchrun when > 1 or when the script makes a process group)

# %% [markdown]
# ## Scan
#
# Each finding is a place in your file (`file:line:col`), a **category** and what to do:
#
# - `rewrite`: mechanical and safe (`.cuda()` → `.to("neuron")`, `torch.cuda.synchronize()` →
#   `torch.neuron.synchronize()`, `"nccl"` → `"neuron"`); `--write` applies it when the spelling allows;
# - `decide`: needs a person (a GradScaler with bf16, cuDNN flags, pinned memory, streams);
# - `blocker`: no Trainium path in the first release (CUDA graphs, Triton kernels, flash-attn, bitsandbytes).
#
# The remedy cites its source (the article, the Neuron docs, or the torch-neuronx source "S") and gives the
# device-agnostic `torch.accelerator` form where PyTorch has one.

# %%
from pathlib import Path

import matplotlib.pyplot as plt

from neuronkit.models import resolve_model
from neuronkit.port import run_script, run_summary, scan_paths, summary_line, table
from neuronkit.resources import data_dir

script_path = Path(script) if script else data_dir() / "examples" / "train_cuda.py"
(scan,) = scan_paths([script_path])
print(table(scan_paths([script_path]), width=110))

# %%
categories = ["rewrite", "decide", "blocker"]
counts = [sum(f.category == c for f in scan.findings) for c in categories]
fig, ax = plt.subplots(figsize=(5, 2.2))
ax.barh(categories, counts, color=["#4c9f70", "#e0a030", "#c8453b"])
ax.invert_yaxis()
ax.set_xlabel("findings")
ax.set_title(f"{script_path.name}: CUDA-specific uses by category")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Diff
#
# The `rewrite` fixes as a unified diff (`neuronkit port train.py --diff`). Lines keep their numbers, so
# an error in the rewritten copy points at the same line of your file; your file is never modified
# (`--write OUT` writes the copy).

# %%
print(scan.diff())

# %% [markdown]
# ## Run
#
# `neuronkit port train.py --run --steps N -- ARGS` runs the rewritten copy on the simulated device, stops
# it after N optimizer steps (a global optimizer-step hook: the script is not edited), and reports the ops
# that fell back to the CPU with the lines of your script that issued them (observed during the first
# step), any blocker it hit, peak memory per core, NEFF compiles and wall time. Only the script you name runs.

# %%
model_path = resolve_model(model)
result = run_script(scan, steps=steps, nproc=nproc,
                    script_args=["--model", str(model_path), "--steps", str(steps), "--seq-len", "16"])
print(run_summary(result))

# %% [markdown]
# ## Key numbers
#
# What to take away: how many uses were mechanical, how many need a decision, whether anything blocks, and
# whether the rewritten script trained on the device. Next: run `neuronkit port` on your own script, then
# `neuronkit run MODEL --script train.py` to put this section into the migration report.

# %%
record = result.record()
print(summary_line([scan]))
print(f"run ok                  {record['ok']} ({record['steps']}/{steps} optimizer steps, {record['nproc']} process)")
print(f"ops that fell back      {len(record['fallbacks'])}")
print(f"NEFF compiles           {record['neff_compiles']}")
