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
run_dir: str = "../runs/tiny-qwen3"  # this run's directory: every notebook of one run uses the same one
dtype: str = "float32"               # float32, bfloat16 or float16
seq_len: int = 16                    # tokens per example input
batch_size: int = 1                  # example inputs per batch
layers: int = 0                      # blocks of a layer slice to run (0: as many as fit the budget)
full_model: bool = False             # run the whole model, however large

prompt: str = "A migration starts with"  # causal LM: text to continue; encoder: text with a [MASK]
max_new_tokens: int = 16                 # tokens of greedy generation
timing_steps: int = 5                    # timed forward passes (after one warm-up)

# %%
from neuronkit.workbook import cpu_baseline, display, lesson, parameters

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size,
                    layers=layers, full_model=full_model)
params

# %% [markdown]
# ## Run the model on the CPU
#
# `load` gives the model every notebook of the run uses: the checkpoint's own class
# (`config.architectures[0]`, from local files; a `.bin` only with `weights_only=True`) in `dtype`, its
# tokenizer, and the task's deterministic example inputs (`batch_size × seq_len` token ids, or
# `pixel_values` / `input_features` from the processor config) with labels, so the model returns a loss.
# A model too large for this machine is loaded as a *layer slice*: the embeddings, its first blocks with
# their real weights, the final norm and the head (`layers` picks how many, `full_model` forces it all).
# The kernel keeps what `load` returns: this notebook's stage below runs on the same model.

# %%
import torch

from neuronkit.workbook.loading import load

subject = load(params)
with torch.inference_mode():
    out = subject.model(**subject.inputs)
print(type(subject.model).__name__, {name: tuple(t.shape) for name, t in subject.inputs.items()})
print("runs on:", subject.model_slice.describe(), f"({subject.model_slice.reason})")
print("loss:", None if getattr(out, "loss", None) is None else round(float(out.loss), 4))

# %% [markdown]
# What does it predict? The most likely tokens (or classes) at the last position: the kind of answer a
# correct device must reproduce exactly.

# %%
import matplotlib.pyplot as plt

logits = out.logits if getattr(out, "logits", None) is not None else out[0]
scores = (logits[0, -1] if logits.dim() == 3 else logits[0]).float().softmax(-1)
top = scores.topk(min(5, scores.numel()))
ids = top.indices.tolist()
labels = ([repr(subject.tokenizer.decode([i])) for i in ids] if subject.tokenizer is not None
          else [subject.config.id2label.get(i, str(i)) for i in ids])
fig, ax = plt.subplots(figsize=(6, 2.4))
ax.barh(labels[::-1], top.values.tolist()[::-1], color="#0969da")
ax.set_xlabel("probability")
ax.set_title(f"CPU reference: top-{len(ids)} predictions at the last position")
plt.show()

# %% [markdown]
# ## Verify and record
#
# `cpu_baseline.run` loads the same model and inputs, runs one warm-up forward pass, times
# `timing_steps` more and keeps the median, and samples the model on `prompt`: greedy decoding for a
# causal LM (no randomness, so a correct device reproduces it token for token), the top guesses for a
# `[MASK]` for an encoder. It records all of it in `stages/01_cpu_baseline.json`.

# %%
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
# ## Next

# %%
lesson.next_step(result)

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["nbval-check-output", "remove-cell"]
# CI's nbval check (folded away): facts that depend only on the model and the parameters
print(display.summary(result))
