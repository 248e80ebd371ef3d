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
# # 09 · Port your script: find the CUDA (or the PyTorch/XLA) in a training script, rewrite it, run it on `neuron`
#
# A team's migration is its training *code*, not only its checkpoint. Two kinds of script arrive:
#
# - **CUDA scripts**: `.cuda()`, `torch.cuda.synchronize()`, `autocast("cuda")`, a GradScaler,
#   `init_process_group("nccl")`, cuDNN flags, and checks such as `if torch.cuda.is_available():`. The
#   promise of TorchNeuron's announcement is "change `.to('cuda')` to `.to('neuron')`"; `neuronkit port` checks what else.
# - **PyTorch/XLA scripts** written for the XLA-based torch-neuronx: `xm.xla_device()`, `xm.mark_step()`,
#   `xm.optimizer_step()`, `pl.MpDeviceLoader`. Neuron 2.30 ended PyTorch/XLA for training, so these must
#   move to the native backend.
#
# This lesson takes a bundled example of each through **scan** (every use, its category and remedy),
# **diff** (the rewrites that keep the script's behaviour) and **run** (the rewritten copy on the simulated
# device for a few optimizer steps). Point `script` or `xla_script` at your own file to do the same with
# yours; the command line is `neuronkit port train.py [DIR...] [--diff] [--write OUT] [--run]`, and
# `neuronkit run MODEL --script train.py` adds the result to the migration report.

# %% tags=["parameters"]
# Parameters (papermill can inject other values in a cell right after this one).
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # load models from local files only, never from the Hub
os.environ.setdefault("TQDM_DISABLE", "1")    # no progress bars in executed notebooks

script: str = ""           # your CUDA training script; "" = the bundled example (neuronkit/data/examples/train_cuda.py)
xla_script: str = ""       # your PyTorch/XLA script; "" = the bundled example (neuronkit/data/examples/train_xla.py)
model: str = "tiny-qwen3"  # the checkpoint the CUDA example trains (a bundled name or a directory)
steps: int = 3             # optimizer steps of each run
nproc: int = 1             # processes (torchrun when > 1)

# %% [markdown]
# ## Scan
#
# `neuronkit port` follows the script into the local modules it imports and reports each finding as a place
# in a file (`file:line:col`), a **category** and what to do:
#
# - `rewrite`: applied by `--write` where it keeps every path the script took (`.cuda()` → `.to("neuron")`,
#   `torch.cuda.synchronize()` → `torch.neuron.synchronize()`, `"nccl"` → `"neuron"`);
# - `decide`: needs a person (a CUDA check whose branches do more than pick a device, cuDNN flags, pinned
#   memory);
# - `blocker`: no Trainium path in the first release (CUDA graphs, Triton kernels, flash-attn, DataParallel).
#
# Each remedy cites a public page (the Neuron docs, PyTorch's) or a section of `docs/port.md`, and gives the
# device-agnostic `torch.accelerator` form where PyTorch has one.

# %%
from pathlib import Path

import matplotlib.pyplot as plt

from neuronkit.models import resolve_model
from neuronkit.port import run_script, run_summary, scan_project, summary_line, table
from neuronkit.resources import data_dir

script_path = Path(script) if script else data_dir() / "examples" / "train_cuda.py"
project = scan_project([script_path])
print(table(project.scans, width=110, not_scanned=project.not_scanned))  # files that are not valid Python, if any

# %%
categories = ["rewrite", "decide", "blocker"]
counts = [sum(f.category == c for s in project.scans for f in s.findings) for c in categories]
fig, ax = plt.subplots(figsize=(5, 2.2))
ax.barh(categories, counts, color=["#4c9f70", "#e0a030", "#c8453b"])
ax.invert_yaxis()
ax.set_xlabel("findings")
ax.set_title(f"{script_path.name}: uses to port, by category")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## A check keeps the path the script took
#
# On Trainium there is no CUDA, so `torch.cuda.is_available()` is False and `device.type == "cuda"` is False:
# the script takes the same branches as on a machine without a GPU. `port` rewrites a check only where its
# branches differ in *where* the work runs and nothing else (`"cuda" if torch.cuda.is_available() else
# "cpu"`, `if device.type == "cuda": model = model.cuda()`); anything more (wrapping the model in
# `DataParallel`, turning on pinned memory) is a decision, shown with both branches.

# %%
for scan in project.scans:
    for f in scan.findings:
        if f.rule.id in ("device-choice", "device-guard") or f.note:
            print(f"{scan.path.name}:{f.line}  {f.category:<7} [{f.rule.id}] {f.code}")
            if f.note:
                print(f"    {f.note}")

# %% [markdown]
# ## Diff
#
# The rewrites as a unified diff (`neuronkit port train.py --diff`). Lines keep their numbers, so an error in
# the rewritten copy points at the same line of your file; your files are never modified (`--write OUT`
# writes the copy).

# %%
print("".join(scan.diff() for scan in project.scans))

# %% [markdown]
# ## Run
#
# `neuronkit port train.py --run --steps N -- ARGS` runs the rewritten copy on the simulated device, from a
# copy of its folder (so paths relative to the script still work), stops it after N optimizer steps (a global
# optimizer-step hook: the script is not edited), and reports the loss of each step, the ops that fell back
# to the CPU with the lines that issued them, any blocker hit, peak memory per core and NEFF compiles. A
# script that makes a process group runs under torchrun; one that spawns its own processes starts them itself.

# %%
model_path = resolve_model(model)
result = run_script(project, steps=steps, nproc=nproc,
                    script_args=["--model", str(model_path), "--steps", str(steps), "--seq-len", "16"])
print(run_summary(result))

# %% [markdown]
# ## From PyTorch/XLA to native
#
# The XLA example trains a classifier the way the XLA-era Neuron guide writes it. As written it cannot run on
# the native backend: there is no `torch_xla`.

# %% tags=["copy"]
try:
    import torch_xla.core.xla_model as xm  # noqa: F401
except ImportError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# `port` rewrites each XLA call to the native code that does the same: the XLA device is `neuron`,
# `mark_step` goes (eager mode runs each op as it is called), `xm.optimizer_step` averages the gradients over
# the processes before `optimizer.step()`, `MpDeviceLoader` becomes a loader that moves each batch to the
# device, `master_print` prints on rank 0. The few helpers that take more than one expression are copied into
# the file after its imports (plain PyTorch), and the torch_xla imports go once nothing uses them.

# %%
xla_path = Path(xla_script) if xla_script else data_dir() / "examples" / "train_xla.py"
xla_project = scan_project([xla_path])
xla_scan = xla_project.scans[0]
print(summary_line(xla_project.scans))
print(xla_scan.diff())

# %%
leftover = [line for line in xla_scan.rewritten.splitlines() if line.lstrip().startswith(("import torch_xla", "from torch_xla"))]
print(f"torch_xla imports left in the rewritten script: {len(leftover)}")
xla_result = run_script(xla_project, steps=steps, nproc=nproc, script_args=["--epochs", "1"])
print(run_summary(xla_result))

# %% [markdown]
# ## Key numbers
#
# What to take away: how many uses were rewritten, how many need a decision, whether anything blocks, and
# whether each rewritten script trained on the device.

# %%
for name, scans, run in (("CUDA", project.scans, result), ("XLA", xla_project.scans, xla_result)):
    record = run.record()
    print(f"{name:<5} {summary_line(scans)}")
    print(f"      run ok {record['ok']} ({record['steps']}/{steps} optimizer steps, {record['nproc']} process), "
          f"losses {', '.join(f'{loss:.3f}' for loss in record['losses'])}, "
          f"ops that fell back {len(record['fallbacks'])}, NEFF compiles {record['neff_compiles']}")

# %% [markdown]
# ## Try it
#
# Set `script` to your own training script (and `xla_script` to an XLA one), or run
# `neuronkit port your_train.py --run -- ARGS` in a terminal.
#
# ## Recap
#
# - A rewrite is applied only where the script keeps every path it took.
# - Checks for CUDA read as without CUDA unless their branches only move the work.
# - PyTorch/XLA calls become native code, with no torch_xla left.
#
# ## Next
#
# `neuronkit run MODEL --script train.py` puts this section into the migration report.
