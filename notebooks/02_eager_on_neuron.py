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
# outputs within tolerance, the same top-1 tokens, the same greedy generation, and a plain PyTorch
# training loop on both devices with the same losses and gradient norms (the loss curves are plotted).

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

device: str = "neuron"    # the NeuronCore to run on, e.g. "neuron:0"
train_steps: int = 2      # SGD steps compared between CPU and neuron
generate_tokens: int = 8  # greedy tokens compared (causal LMs)

# %%
import transformers

from neuronkit.pipeline import session
from neuronkit.stages.eager import run as eager
from neuronkit.workbook import display, lesson, parameters, prerequisites

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size,
                    layers=layers, full_model=full_model, random_weights=random_weights)
prerequisites(params, "eager")  # a record this notebook needs is missing: it stops here
session.neuron_device(device)  # a core this machine does not have is refused here, in one line
setup = session.recipe(params)  # the checkpoint, layer slice and example inputs of notebook 01
transformers.logging.disable_progress_bar()  # no weight-loading bars in executed notebooks
path, torch_dtype, slice_kwargs, inputs = setup.path, setup.dtype, setup.slice_kwargs, setup.inputs
architecture = setup.architecture  # config.json's, or the class neuronkit inferred when it names none
params

# %% [markdown]
# ## The one-line change
#
# A plain PyTorch training loop; only the first line is new:
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
# A Hugging Face model can skip the CPU copy and load its weights straight onto the device with
# `from_pretrained(path, device_map="neuron")`; any other module moves with `model.to("neuron")`. The
# model is loaded in the run's dtype: with bfloat16 or float16 the device computes under
# `torch.autocast("neuron")`, against notebook 01's reference computed the same way on the CPU.

# %% tags=["copy"]
import torch
import transformers

config = transformers.AutoConfig.from_pretrained(path)
model_class = getattr(transformers, (config.architectures or [architecture])[0])
model = model_class.from_pretrained(path, dtype=torch_dtype, device_map=device, **slice_kwargs)  # the only change
batch = {name: tensor.to(device) for name, tensor in inputs.items()}
autocast = {"device_type": "neuron", "dtype": torch_dtype, "enabled": torch_dtype != torch.float32}
print(model_class.__name__, "on", next(model.parameters()).device)

# %% [markdown]
# One forward pass on the device. An op without a Neuron lowering falls back to the CPU silently;
# `torch_neuronx` (imported by `import torch` already) keeps track of which ops ran on the device and
# which fell back. A feature the first release does not support raises instead: the `except` prints it,
# and the stage below records it.

# %% tags=["copy"]
import torch_neuronx  # on the simulator: neuronkit's stand-in with the same tracking API

torch_neuronx.clear_op_tracking()
try:
    with torch.no_grad(), torch.autocast(**autocast):
        out = model(**batch)
    print("loss on", device, "=", None if out.get("loss") is None else round(out.loss.item(), 4))
except (RuntimeError, ValueError) as err:  # what the device raises for what it does not support
    out = None
    print(f"the device refused this model: {type(err).__name__}: {err}")
print("ops that ran on the device:", len(torch_neuronx.get_executed_ops()))
print("ops that fell back to CPU: ", ", ".join(torch_neuronx.get_fallback_ops()) or "none")

# %% [markdown]
# ## Verify and record
#
# `session.adopt` hands the model above to this kernel's stage (a CPU copy of it: no second read of the
# checkpoint). `eager.run` makes the comparison thoroughly and records it in `stages/02_eager.json`: it
# runs notebook 01's inputs on `device`, compares every output with the CPU reference saved by notebook
# 01, decodes greedily on both, and runs the training loop above for `train_steps` steps on both devices
# from the same weights (SGD, because Adam turns rounding-level gradient differences into full-size
# updates). Tolerances follow `dtype`: float32 must match within 1e-4; bfloat16 and float16 run under
# `torch.autocast("neuron")` against the CPU under `torch.autocast("cpu")` (like with like), with looser
# bounds. On a layer slice the embeddings and head take no gradient. The plot below reads its losses from
# the record.

# %% tags=["stage"]
session.adopt(params, model)
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
# ## Your training loop, on the device
#
# The training loop above, on the model you loaded, now that the stage has checked it (training changes its
# weights, so it comes after). Each step's loss comes back to the host with `.item()`, which waits for the
# device. A model with no loss of its own (a base model, a sentence encoder) trains here on a surrogate, the
# mean square of its first output: not a task, but a backward through every layer, as the stage's is.

# %% tags=["copy"]
if out is not None:  # it ran above
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    for step in range(train_steps):
        optimizer.zero_grad()
        with torch.autocast(**autocast):
            out = model(**batch)
            loss = out.loss if out.get("loss") is not None else out[0].float().pow(2).mean()  # no labels: a surrogate
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")

# %% [markdown]
# ## 64-bit integers are computed in 32 bits
#
# The device holds `int64` (and `float64`) tensors at full width, but its ops compute them in 32 bits: the
# inputs are narrowed before the op and the result widened back (TorchNeuron's
# `torch_neuronx/python_ops/dtype_autocast.py`). Token ids never notice; a position, an offset or a hash past
# 2**31 - 1 wraps around silently, with no error. A check against the CPU, the habit this notebook
# teaches, catches it:

# %% tags=["copy"]
offsets = torch.tensor([7, 2**31 - 1, 3_000_000_000])  # int64; the last two reach past int32
on_device = offsets.to(device)
expected, got = offsets + 1, (on_device + 1).cpu()
print("stored:       ", on_device.cpu().tolist())
print("+ 1 on cpu:   ", expected.tolist())
print("+ 1 on device:", got.tolist())
if not torch.equal(got, expected):  # no error is raised: only a comparison with the CPU finds it
    print("differs from the CPU at positions", (got != expected).nonzero().flatten().tolist())

# %% [markdown]
# Stored values survive; arithmetic on them wraps modulo 2**32. Keep such values below 2**31, or compute
# them on the CPU. The op audit (notebook 03) flags the native ops your model feeds 64-bit values.
#
# ## Try it
#
# Set `device = "neuron:1"` in the parameters cell and run the notebook again: the same checks on another
# core. Or reproduce the device's answer in the 64-bit cell on the CPU: `offsets.to(torch.int32) + 1`
# wraps the same way, because that narrowing is what the device does.
#
# ## Recap
#
# - `from_pretrained(path, device_map="neuron")` (or `model.to("neuron")`) is the whole move; the batch
#   moves too.
# - `torch_neuronx.get_fallback_ops()` names the ops that ran on the host; the stage holds every output,
#   greedy generation and two training steps to the CPU reference.
# - 64-bit integer arithmetic wraps at 32 bits on the device: check values past 2**31.
#
# ## Next

# %%
lesson.next_step(result)

# %% jupyter={"source_hidden": true} tags=["nbval-check-output", "remove-cell"]
# CI's nbval check (hidden, shows nothing here): facts that depend only on the model and the parameters
display.checked(display.summary(result))
