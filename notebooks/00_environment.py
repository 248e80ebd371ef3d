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
# This first notebook teaches where the `neuron` device comes from, and starts a run: it checks which
# device this Python process has, describes the model you are migrating, and records both in the run
# directory that every later notebook writes to.
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
run_dir: str = "../runs/tiny-qwen3"  # this run's directory: every notebook of one run uses the same one
dtype: str = "float32"               # float32, bfloat16 or float16
seq_len: int = 16                    # tokens per example input
batch_size: int = 1                  # example inputs per batch

# %% [markdown]
# The cell below validates the parameters before anything is loaded: a missing checkpoint, a value of
# the wrong type or an unknown dtype stops here, with one message listing every problem.

# %%
from neuronkit.workbook import display, parameters, environment

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size)
params

# %% [markdown]
# ## How TorchNeuron becomes a PyTorch device
#
# TorchNeuron registers Trainium through PyTorch's **PrivateUse1** extension point, the slot PyTorch
# reserves for out-of-tree hardware, under the name `neuron`, and PyTorch **autoloads** it during
# `import torch` (a `torch.backends` entry point; `TORCH_DEVICE_BACKEND_AUTOLOAD=0` switches autoloading
# off). There is no `import torch_neuronx` to write: `torch.device("neuron")`, `tensor.to("neuron")`,
# `torch.neuron.*` and `torch.accelerator` just work, and Transformers, accelerate or TorchTitan need no
# Neuron-specific branch.
#
# On a machine without Trainium, neuronkit **simulates** the device on the CPU with the same
# registration, the same op-support policy (native, CPU fallback, unsupported) and the same NEFF cache,
# so every step of the workbook can be rehearsed before you rent a trn2 instance.

# %%
import torch

x = torch.ones(2, 2, device="neuron")  # an ordinary tensor on the PrivateUse1 device
print("tensor device:    ", x.device)
print("torch.accelerator:", torch.accelerator.current_accelerator())
print("neuron devices:   ", torch.neuron.device_count(), "logical NeuronCores")

# %% [markdown]
# ## Record the environment
#
# `environment.run` starts the run: it writes `params.json` into `run_dir`, removes stage records an
# earlier run left there, and records in `stages/00_environment.json` the device report
# (`neuronkit.detect()`), the model's architecture and size read from its `config.json` (no weights are
# loaded yet) and the parameters.

# %%
result = environment.run(params)
display.show(result)

# %% [markdown]
# ## How to read it
#
# - **kind**: `real` (torch-neuronx and a Neuron device node), `simulated` (neuronkit on the CPU) or
#   `none`, with the *reason*. With `none` the stage fails and the later stages are skipped; on a
#   Trn2/Trn3 instance check `pip show torch-neuronx` and `neuron-ls`.
# - **device count, instance family, HBM per core**: PyTorch sees *logical* NeuronCores. On trn2 the
#   default LNC=2 pairs two physical cores, so a trn2.48xlarge shows 64 devices of 24 GiB. Limit them with
#   `NEURON_RT_VISIBLE_CORES` or `NEURON_RT_NUM_CORES`, set before Python starts.
# - **estimated bytes**: the weights alone in `dtype`. When they exceed one core's HBM the stage warns:
#   the model needs tensor parallelism across cores, or a smaller dtype (`bfloat16` halves it).
#   Activations, gradients and optimizer state come on top.
# - **versions**: keep them with your results; the report repeats them.

# %% [markdown]
# ## Another model or dtype
#
# To migrate your own checkpoint, set `model` (and `run_dir`) in the parameters cell and run the
# notebooks again, or run the whole workbook from a terminal. The cell prints the command for the
# current parameters; in JupyterLab, its widgets rebuild the command for another model or dtype.

# %%
display.command_picker(params)

# %% [markdown]
# ## Next
#
# Open **01_cpu_baseline** with the same parameters: it records what the model does on the CPU, the
# reference every later step is held to.
#
# The last cell prints the facts CI checks with nbval (`# NBVAL_CHECK_OUTPUT`): the stage's status and the
# evidence that depends only on the model and the parameters, never on timings or paths.

# %%
# NBVAL_CHECK_OUTPUT
print(display.summary(result))
