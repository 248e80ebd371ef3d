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
# This notebook first asks the device itself which ops ran natively and which fell back, phase by phase,
# then audits every op the model issues, classified against Neuron's op support, so you learn what will
# fall back or block before you are on a rented instance.

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

training: bool = True   # also audit backward and one optimizer step (AdamW)
generate: bool = False  # also audit greedy generate() (causal LMs; runs on random weights, needs the memory)

# %%
import transformers

from neuronkit.pipeline import session
from neuronkit.stages.audit import run as audit
from neuronkit.workbook import display, lesson, parameters, prerequisites

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size,
                    layers=layers, full_model=full_model, random_weights=random_weights)
prerequisites(params, "audit")  # a record this notebook needs is missing: it stops here
setup = session.recipe(params)  # the checkpoint, layer slice and example inputs of notebook 01
transformers.logging.disable_progress_bar()  # no weight-loading bars in executed notebooks
path, slice_kwargs, inputs = setup.path, setup.slice_kwargs, setup.inputs
architecture = setup.architecture  # config.json's, or the class neuronkit inferred when it names none
params

# %% [markdown]
# ## Ask the device: `torch_neuronx.get_fallback_ops()`
#
# The backend records the name of every op it ran and of every op that fell back to the CPU.
# `clear_op_tracking()` starts afresh, so you can ask phase by phase: a forward and backward pass, then
# (for a model that generates from token ids) a few greedily decoded tokens.

# %% tags=["copy"]
import torch
import torch_neuronx  # on the simulator: neuronkit's stand-in with the same tracking API
import transformers

config = transformers.AutoConfig.from_pretrained(path)
model_class = getattr(transformers, (config.architectures or [architecture])[0])
model = model_class.from_pretrained(path, device_map="neuron", **slice_kwargs)
batch = {name: tensor.to("neuron") for name, tensor in inputs.items()}
tracked = {}
try:
    torch_neuronx.clear_op_tracking()
    out = model(**batch)
    loss = out.loss if out.get("loss") is not None else out[0].float().pow(2).mean()  # no labels: a surrogate
    loss.backward()
    tracked["forward + backward"] = (torch_neuronx.get_executed_ops(), torch_neuronx.get_fallback_ops())
    if model.can_generate() and "input_ids" in batch:
        torch_neuronx.clear_op_tracking()
        with torch.no_grad():
            model.generate(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"),
                           max_new_tokens=4, do_sample=False)
        tracked["generate()"] = (torch_neuronx.get_executed_ops(), torch_neuronx.get_fallback_ops())
except (RuntimeError, ValueError) as err:  # what the device raises for what it does not support
    print(f"the device refused this model: {type(err).__name__}: {err}")

for phase, (ran, fell_back) in tracked.items():
    print(f"{phase:19} {len(ran):3} ops on the device; fell back to CPU: {', '.join(fell_back) or 'none'}")

# %% [markdown]
# Tracking tells you *that* an op fell back, not *who* issued it or whether the ops you did not run
# today (another input, the optimizer step) would block. That is the audit's job.
#
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
# `audit.run` does the same and adds what a migration needs: the module each op came from, the dtypes and
# shapes it saw, and a classification against the Neuron op-support policy that the simulated device and
# the compile backend share. It runs **weightless** (the model is built inside a `FakeTensorMode`: shapes
# and dtypes without storage), so a multi-billion-parameter checkpoint audits in seconds; with
# `training=True` it covers backward and an AdamW step, and `generate=True` adds greedy decoding (real
# values: random weights). It records `stages/03_audit.json` and `artifacts/audit/audit.json`.

# %% tags=["stage"]
result = audit.run(params, training=training, generate=generate)
summary = result.evidence.summary
lesson.key_numbers({
    "distinct ops": summary.distinct_ops,
    "calls": summary.total_calls,
    "native, by call": f"{summary.support_pct_calls or 0:.1f} %",
    "blockers": len(summary.blockers),
    "CPU fallbacks": len(summary.fallbacks),
})

# %% [markdown]
# Where the calls go: the most-called ops, coloured by what Neuron does with each.

# %%
import matplotlib.pyplot as plt

ops = display.table(result.evidence.ops, ["op", "calls", "classification", "category", "module_paths"])
colours = {"native": "#1a7f37", "cpu_fallback": "#9a6700", "blocked": "#cf222e"}
if not ops.empty:
    shown = ops.sort_values("calls", ascending=False).head(15)[::-1]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.barh(shown["op"], shown["calls"], color=[colours.get(c, "#6e7781") for c in shown["classification"]])
    for name, colour in colours.items():
        ax.barh([shown["op"].iloc[-1]], [0], color=colour, label=name)
    ax.set_xlabel("calls")
    ax.set_title(f"Top {len(shown)} of {len(ops)} ops by calls")
    ax.legend(loc="lower right")
    plt.show()

# %% [markdown]
# - **Native by call**: the share of calls with a Neuron lowering. A fallback op called once is cheap; a
#   fallback inside every layer is a host round trip per layer per step.
# - **Findings** carry a severity. *blocker*: it fails on the device; change the model before migrating
#   (the stage fails). *warn*: runs, at a cost (CPU fallback, recompiles). *info*: worth knowing, e.g.
#   int64 indices computed in 32 bit. Every finding names the module paths that issued the op and a
#   **remedy**.

# %%
counts = summary.findings  # findings per severity
lesson.folded(display.table(result.evidence.findings,
                            ["severity", "category", "op", "calls", "module_paths", "remedy"]),
              f"Findings: {counts.get('blocker', 0)} blocker, {counts.get('warn', 0)} warn, "
              f"{counts.get('info', 0)} info")

# %%
lesson.folded(ops, f"Every op ({len(ops)}), with the modules that issued it")

# %%
lesson.folded(display.show(result), f"Full record: audit {result.status} — {result.summary}")

# %% [markdown]
# In JupyterLab, filter the op table by category or classification, or by part of a module path (say
# `mlp` or `layers.0`):

# %%
lesson.interactive(display.filter_widget(ops, by=["category", "classification"], text_column="module_paths"),
                   "(an op-table filter: run the notebook in JupyterLab; the full table is folded above)")

# %% [markdown]
# ## A blocker, on purpose: an LSTM
#
# A CPU fallback is slow; a **blocker** does not run at all. PyTorch's LSTM cell calls a fused kernel for
# any device other than the CPU and CUDA, `aten::_thnn_fused_lstm_cell`, which neither TorchNeuron nor
# its CPU fallback has. TorchNeuron's own test specs record the failure as PyTorch's `Could not run
# 'aten::_thnn_fused_lstm_cell' with arguments from the 'CPU' backend`; the simulated device stops at the
# same op and says what to do instead. On the device the first step raises:

# %% tags=["copy"]
lstm = torch.nn.LSTM(input_size=8, hidden_size=8, batch_first=True)
sequence = torch.randn(1, 4, 8)
try:
    lstm.to("neuron")(sequence.to("neuron"))
except RuntimeError as err:  # NotImplementedError is a RuntimeError
    print(f"{type(err).__name__}: {err}")

# %% [markdown]
# The audit finds it without running it on the device, names the module and gives the remedy; on your
# model it does the same for every blocker at once (the stage fails, and the report says *blocked*):

# %%
import neuronkit

lstm_audit = neuronkit.audit(lstm.to("cpu"), (sequence,))
for finding in (f for f in lstm_audit.findings if f.severity == "blocker"):
    print(f"{finding.severity}: {finding.op} in {', '.join(finding.module_paths)}\n  remedy: {finding.remedy}")

# %% [markdown]
# ## Try it
#
# Swap the LSTM for `torch.nn.Embedding(100, 8, sparse=True)` fed `torch.tensor([[1, 2, 3]])`: its forward
# runs on the device, its sparse gradient does not, and the audit flags the `sparse=True` call. With
# `generate=True` in the parameters cell the audit also traces `generate()`.
#
# ## Recap
#
# - `torch_neuronx.clear_op_tracking()` / `get_fallback_ops()` tell you, phase by phase, which ops ran on
#   the host.
# - The audit classifies every op the model issues, weightless, with the module that issued it.
# - A blocker (an LSTM, sparse gradients, NestedTensor) must be changed before migrating; each finding's
#   remedy says how.
#
# ## Next

# %%
lesson.next_step(result, params.run)

# %% jupyter={"source_hidden": true} tags=["nbval-check-output", "remove-cell"]
# CI's nbval check (hidden, shows nothing here): facts that depend only on the model and the parameters
display.checked(display.summary(result))
