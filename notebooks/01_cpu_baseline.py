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
# Before anything moves to Trainium, record what the model does where it already works. This notebook
# loads the model on the CPU in `dtype`, times its forward pass, records its loss on deterministic example
# inputs and samples it: a greedy continuation of `prompt` for a causal LM, the top guesses for a
# `[MASK]` for an encoder. Notebook 02 runs the same inputs on `neuron` and compares against these.

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

prompt: str = "A migration starts with"  # causal LM: text to continue; encoder: text with a [MASK]
max_new_tokens: int = 16                 # tokens of greedy generation
timing_steps: int = 5                    # timed forward passes (after one warm-up)

# %%
from neuronkit.workbook import display, parameters, cpu_baseline

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size)
params

# %% [markdown]
# ## What the stage does
#
# `cpu_baseline.run` loads the checkpoint's own class (`config.architectures[0]`, local files; a `.bin`
# only with `weights_only=True`), builds the task's example inputs (`batch_size × seq_len` token ids with
# the model's tokenizer, or `pixel_values` / `input_features` from the processor config; the same inputs
# in every notebook), runs one
# warm-up forward pass, then times `timing_steps` more and keeps the median. Greedy decoding has no
# randomness, so a correct device reproduces it token for token.

# %%
result = cpu_baseline.run(params, prompt=prompt, max_new_tokens=max_new_tokens, timing_steps=timing_steps)
display.show(result)

# %% [markdown]
# ## How to read it
#
# - **Forward time** is this CPU's speed with the thread count shown: a sanity number, not a Trainium
#   prediction. Notebook 04 compares eager and compiled step times on the device.
# - **Loss** should be plausible for the model (a trained causal LM: a few nats). NaN or infinity fails
#   the stage: fix the model on the CPU first, since nothing can be judged against a broken reference.
# - **Generation / fill-mask** is the behaviour you expect to keep. Read it now; notebook 02 checks that
#   `neuron` produces the same tokens.

# %% [markdown]
# ## Next
#
# Open **02_eager_on_neuron**: the one-line change, `model.to("neuron")`, and a parity check against
# this baseline.
#
# The last cell prints the facts CI checks with nbval (`# NBVAL_CHECK_OUTPUT`): the stage's status and the
# evidence that depends only on the model and the parameters, never on timings or paths.

# %%
# NBVAL_CHECK_OUTPUT
print(display.summary(result))
