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
# # 07 · Scale out: will your parallel layout fit, what will it send, and what will it cost?
#
# One logical NeuronCore of a trn2.48xlarge has 24 GiB of HBM, and the instance has 64 of them. A model
# that trains on one core is rare: an 8B model needs 16 GB for its bf16 weights alone, and as much again
# for gradients and twice that for AdamW. TorchNeuron runs PyTorch's own parallel APIs (DDP, FSDP2,
# tensor and pipeline parallel, DTensor), so the question before renting is which layout fits each core,
# and what it sends over NeuronLink and EFA per step.
#
# This lesson asks `neuronkit.plan`, which answers with PyTorch's fake process group: one process plays
# every rank, the real `parallelize_module` and `fully_shard` shard the model on the meta device, and a
# training step of one and two layers under FakeTensorMode measures activations and collectives. No
# weights are read and nothing is allocated, so it works for any size of model on this machine.
#
# It also answers what the person who decides asks next: how long and how much, training and serving.
# Those figures are **estimates** from a first-principles model (FLOPs at published peaks, HBM traffic, the
# layout's collectives) held to the numbers AWS publishes, each with its band (`docs/cost-model.md`).
#
# Then it trains: short DDP and FSDP2 runs on two simulated cores, launched with torchrun as on the
# instance, each checked against the same steps in one process on the CPU.

# %% tags=["parameters"]
# Parameters (papermill can inject other values in a cell right after this one).
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # load configs from local files only, never from the Hub
os.environ.setdefault("TQDM_DISABLE", "1")    # no progress bars, here or in the processes it starts

model: str = "tiny-qwen3"          # your checkpoint directory, config.json, or a bundled model
seq_len: int = 256                 # tokens per sequence
global_batch: int = 1024           # sequences per optimizer step, for the cost estimates
token_budget: float = 0            # training tokens to price (0: Chinchilla's 20 per parameter)
max_tpot_ms: float = 50.0          # serving latency target: time per output token
input_len: int = 1024              # serving: prompt tokens
output_len: int = 256              # serving: generated tokens
micro_batch: int = 1               # sequences per rank per micro-batch
dtype: str = "bfloat16"
run_dir: str = "../runs/tiny-qwen3"  # the workbook's run directory: the scale-out record goes here
train_ranks: int = 2               # simulated cores for the training runs (0 skips them)
titan_steps: int = 0               # TorchTitan steps to run on the same cores (0: show the command only; 2 take ~25 s)

# %% [markdown]
# ## Your model: the cheapest instance and layout that fit
#
# `neuronkit plan MODEL --sweep` (`neuronkit.cost.sweep` here) tries every instance of the catalogue
# (trn1, trn1n, trn2, the UltraServers), 1, 2, 4, … of them, and every tensor-parallel, pipeline and
# FSDP2 or data-parallel layout; it keeps those that fit and ranks them by dollars per million tokens.
# A small model gets a small instance: it is not spread over 64 cores it cannot use.

# %%
from neuronkit.cost import sweep, text
from neuronkit.cost.shape import model_shape

shape = model_shape(model)
ranked = sweep.train(shape, global_batch=global_batch, seq_len=seq_len, micro_batch=micro_batch,
                     dtype=dtype, tokens=token_budget or None)
print("\n".join(text.ranking(sweep.shortlist(ranked, 3))))
best = ranked[0]

# %% [markdown]
# The first is the cheapest per token; rows without a dollar figure are instances AWS publishes no price
# for (give yours with `--usd-per-hour`). `neuronkit.plan` then measures that layout with PyTorch's fake
# process group: the fullest rank's memory against one core's HBM, and the collectives of one step.

# %%
import neuronkit

yours = neuronkit.plan(model, tp=best.layout.tp, fsdp=best.layout.fsdp, dp=best.layout.dp, pp=best.layout.pp,
                       instance=best.instance, nodes=best.nodes, seq_len=seq_len, micro_batch=micro_batch,
                       dtype=dtype)
print(yours.table())

# %% [markdown]
# ## What an 8B model needs
#
# A Llama-3-8B-sized configuration, built in the notebook (no checkpoint needed), under three layouts on
# one trn2.48xlarge: plain data parallel (every core holds everything), FSDP2 over all 64 cores, and tensor
# parallel inside each chip's 4 cores with FSDP2 across chips.

# %%
from transformers import LlamaConfig

llama_8b = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192,
                       architectures=["LlamaForCausalLM"])
layouts = {"DDP ×64": dict(fsdp=1, dp=64), "FSDP2 ×64": dict(fsdp=64), "TP 4 × FSDP2 16": dict(tp=4, fsdp=16)}
plans = {name: neuronkit.plan(llama_8b, seq_len=2048, **degrees) for name, degrees in layouts.items()}
for name, p in plans.items():
    print(f"{name:>16}: {p.verdict()}")

# %%
import matplotlib.pyplot as plt

kinds = ["parameters", "gradients", "optimizer", "activations", "buffers"]
fig, ax = plt.subplots(figsize=(7, 3))
left = [0.0] * len(plans)
for kind in kinds:
    values = [getattr(p.memory, kind) / 2**30 for p in plans.values()]
    ax.barh(list(plans), values, left=left, label=kind)
    left = [a + b for a, b in zip(left, values)]
hbm = next(iter(plans.values())).hbm_per_core / 2**30
ax.axvline(hbm, color="black", linestyle="--", label=f"one core's HBM ({hbm:.0f} GiB)")
ax.set_xlabel("GiB on the fullest rank (bf16, micro-batch 1 × 2048 tokens)")
ax.set_title("Llama-3-8B-sized training step on one trn2.48xlarge")
ax.legend(fontsize=7, loc="upper right")
fig.tight_layout()
plt.show()

# %% [markdown]
# Tensor parallel trades memory for traffic: its all-reduces carry activations every layer, while FSDP2's
# all-gathers and reduce-scatters carry parameters and gradients. The times below are **estimates** from
# the published link bandwidths (`neuronkit/data/trainium_hardware.toml`), with nothing overlapped: use them to
# compare layouts, and measure on the instance.

# %%
for name in ("FSDP2 ×64", "TP 4 × FSDP2 16"):
    p = plans[name]
    print(f"{name}: est. {p.comm_seconds * 1e3:.0f} ms of communication per step")
    for c in p.collectives:
        print(f"    {c.kind:<15} {c.group:<5} over {c.link:<10} {c.nbytes / 2**30:6.2f} GiB  ({c.carries})")

# %% [markdown]
# ## What it will cost
#
# The same 8B configuration, trained as AWS trained Llama-3.1-8B for its published number (32 ×
# trn1.32xlarge, tensor parallel 32, data parallel 32, 1,024 sequences of 8,192 tokens per step). The
# estimate is the cost model's; AWS measured 47.95 sequences/s, and that row is one of the two the
# model's constants were fitted on. Its band is what it misses the other published rows by.

# %%
from neuronkit.cost import training
from neuronkit.planner.instances import instance as find_instance
from neuronkit.planner.plan import Layout

shape_8b = model_shape(llama_8b)
as_published = training.estimate(shape_8b, find_instance("trn1.32xlarge"), Layout(tp=32, dp=32),
                                 training.TrainingRun(nodes=32, seq_len=8192, global_batch=1024))
print("\n".join(text.training(as_published)))

# %% [markdown]
# Serving your model: the cheapest instance (Inferentia2 included), tensor-parallel degree and batch that
# fit and keep each output token under the latency target; time to first token is the estimate's weakest
# figure (its band is stated apart).

# %%
served = sweep.serve(shape, input_len=input_len, output_len=output_len, max_tpot_s=max_tpot_ms / 1e3)
print("\n".join(text.serving(served[0]) if served else ["no instance serves it within the target"]))

# %% [markdown]
# An instance AWS publishes no price for gets throughput, never a made-up dollar figure: trn2.48xlarge has
# none in the sources the catalogue cites (`neuronkit/data/trainium_hardware.toml`).

# %%
on_trn2 = training.estimate(shape_8b, find_instance("trn2.48xlarge"), Layout(tp=4, fsdp=16),
                            training.TrainingRun(seq_len=2048))
print(f"{on_trn2.tokens_per_s:,.0f} tokens/s; price: {on_trn2.pricing.source}")

# %% [markdown]
# The report's "What it will cost" section reads the cost record this cell writes into the run directory
# (`cost.json`): the cheapest training layout, with hours and dollars for your token budget, and the
# cheapest serving setup at your latency target.

# %%
from neuronkit.cost import record as cost_record

costs = cost_record.summarize(model, tokens=token_budget or None, seq_len=seq_len, global_batch=global_batch,
                              input_len=input_len, output_len=output_len, max_tpot_ms=max_tpot_ms)
print(f"cost record written to {cost_record.write(run_dir, costs)}")

# %% [markdown]
# A layout has to divide the instance: the degrees multiply to the number of cores. Three-way tensor
# parallel on 64 cores does not, and the planner says so before anything is sized:

# %%
try:
    neuronkit.plan(llama_8b, tp=3, seq_len=2048)
except ValueError as err:
    print(f"{type(err).__name__}: {err}")

# %% [markdown]
# Pick degrees that divide the cores (1, 2, 4 for tensor parallel inside a chip; FSDP2 takes the rest).
#
# ## Your training script on two simulated cores
#
# `train_fsdp2.py` is a training script as you would write it for a trn2 instance: PyTorch's process
# group, device mesh and FSDP2, with `neuron` as the device, and nothing from this workbook. It trains
# your model (a causal LM of up to 1 GiB in float32; otherwise the bundled tiny-qwen3) for two AdamW steps
# on one batch of random tokens. The next cell copies it into the run directory and shows it.

# %%
import shutil
from pathlib import Path

from neuronkit.distributed import launch
from neuronkit.models import has_weights, resolve_model
from neuronkit.resources import data_dir

train_model = model
if reason := launch.untrainable(model):
    train_model = "tiny-qwen3"
    print(f"{reason}: training the bundled tiny-qwen3 instead, to show the runs")
elif not has_weights(model):
    print(f"{model} has no weights for from_pretrained: the script trains the bundled tiny-qwen3 instead")
checkpoint = str(resolve_model(train_model if has_weights(train_model) else "tiny-qwen3"))
script = Path(run_dir) / "train_fsdp2.py"
script.parent.mkdir(parents=True, exist_ok=True)
shutil.copyfile(data_dir() / "examples" / "train_fsdp2.py", script)
print(script.read_text())

# %% [markdown]
# The same launch as on the instance: torchrun starts one process per core (`--standalone`: one node,
# a free rendezvous port). Each rank's `dist.init_process_group()` picks the `neuron` process group and,
# as torch-neuronx does, makes `neuron:<LOCAL_RANK>` its device. The simulator moves the collectives'
# bytes with gloo on the host: the numbers are the device's, the time is not NeuronLink's.

# %% tags=["copy"]
import os
import subprocess
import sys

torchrun = Path(sys.executable).with_name("torchrun")  # the torchrun of this kernel's environment
command = ["--standalone", "--nproc-per-node", str(train_ranks), script.name, "--model", checkpoint]
if train_ranks:
    print("$ torchrun", *command)
    done = subprocess.run([str(torchrun), *command], cwd=script.parent, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    print(done.stdout + done.stderr)
    print("exit status", done.returncode)

# %% [markdown]
# Each rank holds half of every parameter (`fully_shard` split them over the mesh); rank 0 prints each
# step's loss averaged over the ranks with an all-reduce.
#
# ## DDP and FSDP2, checked against one CPU process
#
# The workbook's own runs of the same launch (`torchrun --nproc_per_node 2 --rdzv-backend c10d ...`) go
# one step further: each rank trains your model for two SGD steps on its half of a batch of 4 × 16
# tokens, in float32, then repeats the steps on the whole batch in one process on the CPU and compares
# every parameter. The result is recorded for the report.

# %%
from neuronkit.distributed import record

scale_out = None
if train_ranks:
    results = launch.run(["ddp", "fsdp2"], nproc=train_ranks, model=train_model, timeout=600)
    scale_out = record.summarize(results, plan=yours.verdict())
    record.write(run_dir, scale_out)
    print(f"ranks on {', '.join(scale_out['devices'])} through the {scale_out['backend']} process group")
    for name, s in scale_out["scenarios"].items():
        losses = " → ".join(f"{x:.4f}" for x in s["losses"])
        reference = " → ".join(f"{x:.4f}" for x in s["reference_losses"])
        print(f"{name:>6}: loss {losses} (one CPU process: {reference}); largest parameter difference "
              f"{s['max_param_diff']:.1e}: {'parity' if s['parity'] else 'NO PARITY'}")

# %% [markdown]
# FSDP2 keeps a shard of every parameter on each core and gathers whole layers only while it computes
# with them: each core's memory holds its share of the parameters between steps.

# %%
if scale_out:
    fsdp = scale_out["scenarios"]["fsdp2"]
    print(f"whole model: {fsdp['full_param_bytes']:,} bytes of parameters")
    for device, shard, held in zip(scale_out["devices"], fsdp["param_bytes_per_rank"], fsdp["device_bytes_per_rank"]):
        print(f"  {device}: {shard:,} bytes of parameter shards; {held:,} bytes allocated on the core after sharding")

# %% [markdown]
# The record (`distributed.json` in the run directory) gives the report its distributed card. When notebooks
# 00–06 ran into the same run directory, render the report again to include it:

# %%
if scale_out and (Path(run_dir) / "stages").is_dir():
    neuronkit.report(run_dir)

# %% [markdown]
# ## TorchTitan on simulated cores
#
# The TorchTitan recipe: TorchTitan trains Llama 3 with FSDP2 and `--compile.enable --compile.backend
# neuron`, launched by torchrun with one rank per core (`NEURON_RT_NUM_CORES`). Here it is torchtitan 0.3.0
# as released, on its llama3 debug model, with a tokenizer and dataset made offline
# (`neuronkit.titan.assets`) and the client-side changes a `torchtitan-neuron` fork needs, each
# explained in `neuronkit/titan/shims.py`: FlexAttention's device check, the `neuron` backend for the
# compiles torchtitan makes at import, a cos/sin RoPE instead of complex numbers, torch 2.13's missing
# `set_timeout`, FlexAttention under a non-inductor backend, and parameter init that does not redraw the
# host generator's numbers forever (the device's random ops are CPU fallbacks). The command, for
# `train_ranks` cores:

# %%
from neuronkit.titan import recipe

titan_dir = Path(run_dir) / "torchtitan"
print(recipe.shell(nproc=train_ranks or 2, steps=titan_steps or 2, out=titan_dir))

# %% [markdown]
# Running it takes about 25 s for two steps (torchtitan builds and compiles its model on every rank), so
# this notebook only shows it; the test suite runs it (`tests/clients/test_torchtitan.py`). Set
# `titan_steps=2` to run it here: every rank logs the same, all-reduced loss.

# %%
if train_ranks and titan_steps:
    titan = recipe.run(nproc=train_ranks, steps=titan_steps, out=titan_dir)
    print(titan.shell(), *titan.steps(), f"losses by rank: {titan.losses}", sep="\n")

# %% [markdown]
# ## Lightning on the same cores
#
# A Lightning script needs no change either: `Trainer(accelerator="neuron", precision="bf16-mixed")`. Lightning
# knows no `neuron` device of its own; with neuronkit installed, the device's autoload registers the accelerator
# when Lightning is imported, keeps a one-core run on its core, autocasts bf16 on `neuron`, and sets DDP up as
# the neuron process group needs (`neuronkit/clients/lightning.py`; what a hand-written accelerator meets instead:
# the "lightning" rows of `neuronkit/data/client_paths.toml`). Under torchrun each process takes its core;
# `train_lightning.py`, copied beside `train_fsdp2.py`, trains the same model for two steps:

# %%
lightning_script = script.with_name("train_lightning.py")
shutil.copyfile(data_dir() / "examples" / "train_lightning.py", lightning_script)
if train_ranks:
    lightning_command = ["--standalone", "--nproc-per-node", str(train_ranks), lightning_script.name,
                         "--model", checkpoint]
    print("$ torchrun", *lightning_command)
    done = subprocess.run([str(torchrun), *lightning_command], cwd=script.parent, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    print(done.stdout + (done.stderr[-3000:] if done.returncode else ""))  # Lightning's own notices: stderr
    print("exit status", done.returncode)

# %% [markdown]
# ## Try it
#
# Run `train_fsdp2.py` with `--nproc-per-node 4` (four simulated cores) and compare each rank's parameter
# bytes; or plan your model with `neuronkit.plan(model, tp=2)` and see which collectives tensor parallel
# adds; or price your own rate for trn2 with `neuronkit plan MODEL --sweep --usd-per-hour 40`.
#
# ## Recap
#
# - Plan before renting: the cheapest instance and layout that fit, each rank's memory against its core's
#   HBM, what the step sends, and what training and serving will cost, as estimates with a band measured
#   against AWS's published numbers.
# - A training script for Trainium is PyTorch's own (`init_process_group`, `init_device_mesh("neuron", ...)`,
#   `fully_shard`), launched with `torchrun --nproc-per-node N`, one process per core.
# - FSDP2 divides the parameters over the ranks; the layout's degrees must divide the cores.

# %% [markdown]
# ## Next
#
# - Try your own layout from the command line: `neuronkit plan MODEL --tp 4 --fsdp 16 --seq-len 4096`
#   (exit status 0 when it fits, 1 when it does not: a CI gate for a config change), or
#   `neuronkit plan MODEL --sweep` (training) and `neuronkit plan MODEL --sweep --serve --max-tpot-ms 50`.
# - Your own script on several simulated cores: `torchrun --nproc_per_node 2 train.py`, with
#   `dist.init_process_group()` and `init_device_mesh("neuron", ...)` as on the instance. The device's limits
#   come with it: no `all_to_all` between 2 processes, no runtime use before `init_process_group`.
# - Plans count bf16 parameters, gradients and AdamW state without a float32 master copy, and leave out
#   the runtime's reserve and compiled-graph scratch space: keep a few GiB of headroom.
