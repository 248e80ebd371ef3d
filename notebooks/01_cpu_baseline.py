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
# # 01 · CPU baseline: the reference every later step is held to
#
# Before anything moves to Trainium, record what the model does where it already works: its outputs on
# fixed inputs, its loss, what it predicts, how long a forward pass takes. Notebook 02 runs the same
# inputs on `neuron` and holds the device to these numbers.

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

prompt: str = "A migration starts with"  # causal LM: text to continue; encoder: text with a [MASK]
max_new_tokens: int = 16                 # tokens of greedy generation
timing_steps: int = 5                    # timed forward passes (after one warm-up)

# %%
from neuronkit.pipeline import session
from neuronkit.stages.cpu_baseline import run as cpu_baseline
from neuronkit.workbook import display, lesson, parameters, prerequisites

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size,
                    layers=layers, full_model=full_model, random_weights=random_weights)
prerequisites(params, "cpu_baseline")  # a record this notebook needs is missing: it stops here
params

# %% [markdown]
# ## What this run loads
#
# The checkpoint directory, the dtype, and the run's **example inputs**: a dict of tensors, the model's
# forward arguments as your dataloader would give them (`batch_size × seq_len` token ids for text,
# `pixel_values` or `input_features` from the processor config for vision and speech), with labels so the
# model returns a loss. Every notebook of the run uses the same ones. A model too large for this machine
# runs as a *layer slice*: its embeddings, its first blocks with their real weights, the final norm and the
# head (`layers` picks how many, `full_model` forces it all); the slice is a `from_pretrained` keyword.

# %%
import transformers

setup = session.recipe(params)
transformers.logging.disable_progress_bar()  # no weight-loading bars in executed notebooks
path, torch_dtype, slice_kwargs, inputs = setup.path, setup.dtype, setup.slice_kwargs, setup.inputs
architecture = setup.architecture  # config.json's, or the class neuronkit inferred when it names none
print("checkpoint:", path)
print("runs on:   ", setup.model_slice.describe(), f"({setup.model_slice.reason})")
print("inputs:    ", {name: tuple(t.shape) for name, t in inputs.items()})

# %% [markdown]
# ## Load it and run it on the CPU
#
# Transformers' own call, with the checkpoint's own class (`config.architectures[0]`), so a classifier
# keeps its head; a config saved without `architectures` names none, and then the class whose weights match
# the checkpoint's is taken (`architecture`, which notebook 00's record names). `output_loading_info=True`
# says which weights the class has and the checkpoint lacks (those start random) before you trust a single
# number. On a layer slice, transformers' load report
# lists the blocks past the slice as `UNEXPECTED`: they are the ones left out on purpose, and their
# weights are never read. The kernel keeps this model: the stage below runs on it, without reading the
# checkpoint again.

# %% tags=["copy"]
import torch
import transformers

config = transformers.AutoConfig.from_pretrained(path)
model_class = getattr(transformers, (config.architectures or [architecture])[0])  # its own class, head included
model, loading_info = model_class.from_pretrained(path, dtype=torch_dtype, output_loading_info=True, **slice_kwargs)
print(f"{model_class.__name__}: {sum(p.numel() for p in model.parameters()):,} parameters in {torch_dtype}")
print("weights missing from the checkpoint:", loading_info["missing_keys"] or "none")

with torch.inference_mode():
    out = model(**inputs)
print("output:", {name: tuple(value.shape) for name, value in out.items() if isinstance(value, torch.Tensor)})
print("loss:", None if out.get("loss") is None else round(out.loss.item(), 4))

# %% [markdown]
# What does it predict? The most likely tokens (or classes) at the last position: the kind of answer a
# correct device must reproduce exactly.

# %%
import matplotlib.pyplot as plt

logits = out.logits if getattr(out, "logits", None) is not None else out[0]
scores = (logits[0, -1] if logits.dim() == 3 else logits[0]).float().softmax(-1)
top = scores.topk(min(5, scores.numel()))
ids = top.indices.tolist()
labels = ([repr(setup.tokenizer.decode([i])) for i in ids] if setup.tokenizer is not None
          else [model.config.id2label.get(i, str(i)) for i in ids])
fig, ax = plt.subplots(figsize=(6, 2.4))
ax.barh(labels[::-1], top.values.tolist()[::-1], color="#0969da")
ax.set_xlabel("probability")
ax.set_title(f"CPU reference: top-{len(ids)} predictions at the last position")
plt.show()

# %% [markdown]
# ## Verify and record
#
# `session.adopt` hands the model loaded above to this kernel's stage (it checks that it is the run's
# class, dtype and slice). `cpu_baseline.run` then runs one warm-up forward pass on it, times
# `timing_steps` more and keeps the median, and samples the model on `prompt`: greedy decoding for a
# causal LM (no randomness, so a correct device reproduces it token for token), the top guesses for a
# `[MASK]` for an encoder. It records all of it in `stages/01_cpu_baseline.json`.

# %% tags=["stage"]
session.adopt(params, model, loading_info)  # the stage runs on `model`: the checkpoint is read once
result = cpu_baseline.run(params, prompt=prompt, max_new_tokens=max_new_tokens, timing_steps=timing_steps)
ev = result.evidence
if ev.generate:
    sample = {"greedy text": ev.generate.text.strip()[:60]}
elif ev.fill_mask:
    sample = {"[MASK] guesses": ", ".join(guess.token for guess in ev.fill_mask.predictions[:3])}
else:
    sample = {}
lesson.key_numbers({
    "forward (host CPU, median)": "—" if ev.forward_ms is None else f"{ev.forward_ms:.1f} ms",
    "loss": "—" if ev.loss is None else f"{ev.loss:.3f}",
    "output shape": " × ".join(map(str, ev.logits_shape)) or "—",
    **sample,
})

# %%
lesson.folded(display.show(result), f"Full record: cpu_baseline {result.status} — {result.summary}")

# %% [markdown]
# - **Forward time** is this CPU's speed: a sanity number, not a Trainium prediction. Notebook 04 compares
#   eager and compiled step times on the device.
# - **Loss** should be plausible for the model (a trained causal LM: a few nats). NaN or infinity fails
#   the stage: nothing can be judged against a broken reference.
# - **Sample** is the behaviour you expect to keep: greedy text for a causal LM, `[MASK]` guesses for an
#   encoder.

# %% [markdown]
# ## Try it
#
# Give a text model your own sentence: `tokenizer = transformers.AutoTokenizer.from_pretrained(path)`,
# `batch = tokenizer("Your text", return_tensors="pt")`, then `model(**batch, labels=batch["input_ids"]).loss`.
# A trained causal LM gives a few nats on ordinary text, far below `ln(vocab size)`
# (`math.log(config.vocab_size)`), which is what random weights give.
#
# ## Recap
#
# - `from_pretrained(path, dtype=..., output_loading_info=True)` loads the checkpoint's own class and says
#   which weights it lacked.
# - The CPU forward pass, loss and greedy sample are the reference every later notebook is held to.
# - The reference outputs are saved in the run directory; notebook 02 reads them, it does not recompute.
#
# ## Next

# %%
lesson.next_step(result)

# %% jupyter={"source_hidden": true} tags=["nbval-check-output", "remove-cell"]
# CI's nbval check (hidden, shows nothing here): facts that depend only on the model and the parameters
display.checked(display.summary(result))
