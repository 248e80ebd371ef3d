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
# # 00 · Environment: which `neuron` device, which model
#
# This workbook moves a PyTorch / Hugging Face model to AWS Trainium with **TorchNeuron**, the native
# PyTorch backend, one notebook per step of the migration order: CPU baseline → eager on `neuron` → op
# audit → `torch.compile` → profiling → report.
#
# This first notebook asks PyTorch which `neuron` device this Python process has, checks whether the
# model you are migrating fits one NeuronCore, and starts a run: it records both in the run directory
# that every later notebook writes to.
#
# **You set** the parameters in the next cell. `model` is a bundled model (`tiny-qwen3`, a causal LM;
# `tiny-bert`, an encoder) or the path of your own Hugging Face checkpoint directory (`config.json`,
# `*.safetensors`, tokenizer files). Run the notebooks in order with the same parameters, or all of them
# at once with `neuronkit run MODEL --out DIR`.

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

# %% [markdown]
# The cell below validates the parameters before anything is loaded: a missing checkpoint, a value of
# the wrong type or an unknown dtype stops here, with one message listing every problem.

# %%
from neuronkit.units import format_bytes
from neuronkit.stages.environment import run as environment
from neuronkit.workbook import display, lesson, parameters

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size,
                    layers=layers, full_model=full_model, random_weights=random_weights)
params

# %% [markdown]
# ## Where `neuron` comes from
#
# TorchNeuron registers Trainium through PyTorch's **PrivateUse1** extension point, the slot PyTorch
# reserves for out-of-tree hardware, under the name `neuron`, and PyTorch **autoloads** it during
# `import torch` (a `torch.backends` entry point; `TORCH_DEVICE_BACKEND_AUTOLOAD=0` switches autoloading
# off). There is no `import torch_neuronx` to write: `torch.device("neuron")`, `tensor.to("neuron")`,
# `torch.neuron.*` and `torch.accelerator` just work, and Transformers, accelerate or TorchTitan need no
# Neuron-specific branch. Ask PyTorch what it sees:

# %% tags=["copy"]
import torch

has_neuron = hasattr(torch, "neuron") and torch.neuron.is_available()  # torch.neuron: registered by TorchNeuron
print("torch.accelerator:           ", torch.accelerator.current_accelerator())
print("torch.neuron.is_available(): ", has_neuron)
if has_neuron:
    print("torch.neuron.device_count(): ", torch.neuron.device_count(), "logical NeuronCores")
    properties = torch.neuron.get_device_properties(0)
    print("neuron:0:                    ", properties.name, f"{properties.total_memory / 2**30:.0f} GiB HBM")
    x = torch.ones(2, 2, device="neuron")
    print("a tensor on:                 ", x.device, f"({torch.neuron.memory_allocated(0)} bytes allocated)")

# %% [markdown]
# Cells with the tag `copy`, like the one above, are plain PyTorch and Transformers: paste them into your
# own code. The others use neuronkit, the workbook's helper library. Its `detect()` adds *which* device
# this is, and why:

# %%
import neuronkit

device = neuronkit.detect()  # real Trainium, neuronkit's simulation, or none, and why
print(device.kind, "-", device.reason)

# %% [markdown]
# On a machine without Trainium, neuronkit **simulates** the device on the CPU with the same
# registration, the same op-support policy (native, CPU fallback, unsupported) and the same NEFF cache,
# so every step of the workbook can be rehearsed before you rent a trn2 instance. `kind` says which one
# you have: `real`, `simulated` or `none`.
#
# ## Does the model fit one NeuronCore?
#
# PyTorch sees *logical* NeuronCores, each with its own slice of HBM (on trn2 the default LNC=2 pairs two
# physical cores: 24 GiB each). The weights are the floor; training with AdamW needs about four times
# their size (weights, gradients and two optimizer moments) before activations. The model's size comes
# from its `config.json`: no weights are loaded.

# %%
import matplotlib.pyplot as plt

from neuronkit import models

config = models.load_config(params.model)
sizes = {"weights\nfloat32": models.estimate_bytes(config, "float32"),
         "weights\nbfloat16": models.estimate_bytes(config, "bfloat16"),
         "AdamW training\nfloat32 (~4x)": 4 * models.estimate_bytes(config, "float32")}
hbm = device.hbm_bytes_per_core or 0
fig, ax = plt.subplots(figsize=(6, 2.8))
ax.bar(list(sizes), [b / 2**30 for b in sizes.values()], color="#0969da")
if hbm:
    ax.axhline(hbm / 2**30, color="#cf222e", linestyle="--", label=f"one core's HBM ({hbm / 2**30:.0f} GiB)")
    ax.legend(loc="center right")
ax.set_yscale("log")
ax.set_ylabel("GiB (log scale)")
ax.set_title(f"{params.model}: {models.num_parameters(config):,} parameters against one NeuronCore")
plt.show()

# %% [markdown]
# ## A core that is not there: the error, on purpose
#
# Cores are numbered `neuron:0` to `neuron:<device_count() - 1>`. Code written for an 8-GPU box
# (`cuda:7`), a `LOCAL_RANK` from the wrong launcher, or `NEURON_RT_VISIBLE_CORES` narrowing what this
# process sees all end up asking for a core that does not exist. `torch.neuron.set_device` checks the
# index and raises a `ValueError` naming it (TorchNeuron's `torch_neuronx/__init__.py`):

# %% tags=["copy"]
if has_neuron:
    try:
        torch.neuron.set_device(torch.neuron.device_count())  # one past the last core
    except ValueError as err:
        print(f"{type(err).__name__}: {err}")
    print("current core:", torch.neuron.current_device())

# %% [markdown]
# The current core is unchanged. In a `torchrun` job each process picks its core from `LOCAL_RANK`, so
# the launch decides which indices exist (notebook 07).
#
# ## Verify and record
#
# `environment.run` starts the run: it writes `params.json` into `run_dir`, removes stage records an
# earlier run left there, and records in `stages/00_environment.json` the device report, the model's
# architecture and size, and the parameters. The key numbers, then the full record (folded):

# %% tags=["stage"]
result = environment.run(params)
device, model_info = result.evidence.device, result.evidence.model
lesson.key_numbers({
    "device": device.kind,
    "logical NeuronCores": device.device_count,
    "HBM per core": format_bytes(device.hbm_bytes_per_core or 0),
    "parameters": f"{model_info.num_parameters:,}",
    f"weights in {params.config.dtype}": format_bytes(model_info.estimated_bytes),
})

# %%
lesson.folded(display.show(result), f"Full record: environment {result.status} — {result.summary}")

# %% [markdown]
# - **device**: with `none` the later stages are skipped; on a Trn2/Trn3 instance check
#   `pip show torch-neuronx` and `neuron-ls`. `NEURON_RT_VISIBLE_CORES` or `NEURON_RT_NUM_CORES`, set
#   before Python starts, limit the cores this process sees.
# - **weights**: when they exceed one core's HBM the stage warns: the model needs tensor parallelism
#   across cores (notebook 07 plans it), or a smaller dtype (`bfloat16` halves it).
# - **versions** (in the record): keep them with your results; the report repeats them.
#
# ## Another model or dtype
#
# Set `model` (and `run_dir`) in the parameters cell and run the notebooks again, or run the whole
# workbook from a terminal with the command below (in JupyterLab, the picker rebuilds it).

# %%
lesson.interactive(display.command_picker(params),
                   "(a model and dtype picker that rebuilds this command: run the notebook in JupyterLab)")

# %% [markdown]
# ## Try it
#
# Allocate a tensor on the last core, `last = torch.neuron.device_count() - 1` then
# `torch.ones(1024, 1024, device=f"neuron:{last}")`, and compare `torch.neuron.memory_allocated(last)` with
# `memory_allocated(0)`: each core has its own HBM. Then set `NEURON_RT_NUM_CORES=2` in a terminal, start
# Python and ask `torch.neuron.device_count()` again.
#
# ## Recap
#
# - `import torch` is enough: TorchNeuron registers `neuron` as PyTorch's PrivateUse1 device.
# - Each logical NeuronCore has its own HBM; a core index past `device_count() - 1` is a `ValueError`.
# - This run is started: `params.json` and the environment record are in `run_dir`.
#
# ## Next

# %%
lesson.next_step(result)

# %% jupyter={"source_hidden": true} tags=["nbval-check-output", "remove-cell"]
# CI's nbval check (hidden, shows nothing here): facts that depend only on the model and the parameters
display.checked(display.summary(result))
