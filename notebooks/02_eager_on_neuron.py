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
# This notebook moves the model to `neuron` and runs it, then holds the device to notebook 01's reference:
# outputs within tolerance, the same top-1 tokens, the same greedy generation, and the seed article's
# training loop on both devices with the same losses and gradient norms (the loss curves are plotted).

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

device: str = "neuron"    # the NeuronCore to run on, e.g. "neuron:0"
train_steps: int = 2      # SGD steps compared between CPU and neuron
generate_tokens: int = 8  # greedy tokens compared (causal LMs)

# %%
from neuronkit.workbook import display, eager, lesson, parameters

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size,
                    layers=layers, full_model=full_model)
params

# %% [markdown]
# ## The one-line change
#
# The seed article's training loop; only the first line is new:
#
# ```python
# model = MyModel().to("neuron")   # the only change
# optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
# for batch in dataloader:
#     optimizer.zero_grad()
#     loss = criterion(model(batch), targets)
#     loss.backward()
#     optimizer.step()
# ```
#
# First the line itself: a copy of notebook 01's model (this kernel loaded it once) moved to `neuron`,
# one forward pass on the run's example batch, and the same pass on the CPU. `torch_neuronx` keeps track
# of which ops ran on the device and which fell back to the CPU.

# %%
import copy

import torch
import torch_neuronx  # on the simulator: neuronkit's stand-in with the same tracking API

from neuronkit.workbook.loading import load

subject = load(params)  # the model and example inputs of notebook 01

with lesson.attempt("The forward pass on the device"):
    net = copy.deepcopy(subject.model).to(device)  # the only change
    batch = {name: t.to(device) for name, t in subject.inputs.items()}
    torch_neuronx.clear_op_tracking()
    with torch.no_grad():
        neuron_loss = net(**batch).loss.item()
        cpu_loss = subject.model(**subject.inputs).loss.item()
    print("ops that ran on the device:", len(torch_neuronx.get_executed_ops()))
    print("ops that fell back to CPU: ", ", ".join(torch_neuronx.get_fallback_ops()) or "none")
    print(f"loss on cpu {cpu_loss:.4f}, on {device} {neuron_loss:.4f}")
    del net, batch

# %% [markdown]
# ## Verify and record
#
# `eager.run` makes the comparison thoroughly and records it in `stages/02_eager.json`: it runs notebook
# 01's inputs on `device`, compares every output with the CPU's, decodes greedily on both, and runs the
# training loop above for `train_steps` steps on both devices from the same weights (SGD, because Adam
# turns rounding-level gradient differences into full-size updates). Tolerances follow `dtype`: float32
# must match within 1e-4; bfloat16 and float16 run under `torch.autocast("neuron")` against the CPU under
# `torch.autocast("cpu")` (like with like), with looser bounds. On a layer slice the embeddings and head
# take no gradient. It trains once; the plot below reads its losses from the record.

# %%
result = eager.run(params, device=device, train_steps=train_steps, generate_tokens=generate_tokens)
ev = result.evidence
largest, generated, training = ev.parity.largest_abs_err(), ev.parity.generate_identical, ev.training
lesson.key_numbers({
    "largest error vs CPU": "—" if largest is None else f"{largest:.1e}",
    "top-1 agreement": f"{ev.parity.top1_agreement or 0:.0%}",
    "greedy generation": "—" if generated is None else ("identical" if generated else "differs"),
    "training": "—" if training is None else ("matches" if training.ok else "differs"),
    "CPU-fallback ops": len(ev.fallback_ops),
})

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 2.8))
ax.plot(training.cpu_losses if training else [], "o-", label="cpu", color="#6e7781", linewidth=3)
ax.plot(training.neuron_losses if training else [], "x--", label=device, color="#0969da")
ax.set_xlabel("SGD step (one batch, repeated)")
ax.set_ylabel("loss")
ax.set_title("The same training loop on CPU and on neuron")
ax.legend()
plt.show()

# %% [markdown]
# The curves should lie on top of each other: same weights, same batch, same arithmetic up to rounding.
# Hugging Face models can also load straight onto the device with
# `from_pretrained(path, device_map="neuron")`.

# %%
lesson.folded(display.show(result), f"Full record: eager {result.status} — {result.summary}")

# %% [markdown]
# - **Largest error** is per output, against `atol`/`rtol` (the folded record lists each output);
#   **top-1 agreement** is the share of positions whose most likely token is the same.
# - **CPU-fallback ops** ran on the host, a round trip per call: fine for a rare op, costly inside every
#   layer. The record says in which phase (forward, generate, train) each one appeared.
# - **NEFF cache** (in the record): `misses` are compilations, `hits` reuse, `disk_hits` come from an
#   earlier process. On Trainium the misses are the slow part of a first run.
#
# A `fail` here marks the model *blocked* in the report, and notebooks 04 and 05 are skipped.
# `NEURONKIT_STRICT=1` in the environment (before Python starts) makes every CPU fallback raise where it
# happens.
#
# ## Next

# %%
lesson.next_step(result)

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["nbval-check-output", "remove-cell"]
# CI's nbval check (folded away): facts that depend only on the model and the parameters
print(display.summary(result))
