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
# # 04 · `torch.compile`: graphs instead of ops, and the shapes that recompile them
#
# Eager mode compiles and launches one NEFF per op. `torch.compile` with the `neuron` backend captures
# whole graphs: TorchDynamo traces the Python, AOTAutograd builds the forward and backward graphs ahead of
# time, the backend lowers each graph to StableHLO and neuronx-cc compiles one NEFF per graph (there is no
# Inductor). The documented rules that shape a migration:
#
# - `fullgraph=True` is recommended. A **graph break** splits the model into several graphs, each
#   compiled on its own, with Python running in between.
# - Shapes are static: `dynamic=True` is **rejected**, and every new input shape **recompiles**. Real
#   inputs of many lengths need padding into a few **buckets**.
# - `mode` accepts only `"default"`; other modes warn and fall back to it.
# - The first call pays the compilation; the NEFF cache makes later runs cheap.

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

device: str = "neuron"  # the NeuronCore to compile for, e.g. "neuron:0"
timing_runs: int = 5    # interleaved eager/compiled timings (medians)
prompts_file = None     # your prompts, one per line, for bucket advice (None: data/sample_prompts.txt)
max_buckets: int = 4    # at most this many bucket lengths, i.e. compilations

# %%
from neuronkit.workbook import display, parameters, torch_compile

params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size)
params

# %% [markdown]
# ## Compiling for Trainium
#
# From the seed article: set the default backend once, before the first compilation, or name it in each
# call.
#
# ```python
# torch.compiler.set_default_backend("neuron")  # call once, before any compile
# model = MyModel().to("neuron")
# model.compile()  # no backend argument
# ```
#
# `torch_compile.run` runs `neuronkit check`'s compile and timing stages: it compiles the model on the
# device, runs a forward and backward pass against notebook 01's CPU reference, feeds a shorter input to count recompiles, and
# times eager against compiled. It then measures the token lengths of `prompts_file` and asks
# `suggest_buckets` how to bound the compilations they would cause.

# %%
result = torch_compile.run(params, device=device, timing_runs=timing_runs, prompts_file=prompts_file,
                     max_buckets=max_buckets)
display.show(result)

# %% [markdown]
# ## How to read it
#
# - **Graphs and graph breaks**: one graph is the goal. Each break has a reason and the source line that
#   caused it. What the backend cannot lower (say, a higher-order op such as `torch.cond`) fails the
#   compilation as a lowering error naming the op; nothing inside a graph runs on the host.
# - **Recompiles**: the graphs a second, shorter input compiled. Each one is a full compilation on
#   Trainium.
# - **Compile time, eager and compiled step times, speed-up**: on the simulator the times are the host's;
#   read the ratio, and measure on Trainium before you trust an absolute number.
# - **Parity** compares the compiled model with eager on the device, output by output.
# - **Buckets**: how many compilations the prompt lengths cause unbucketed (one per distinct length), the
#   recommended bucket lengths, the compilations left and the padding they cost.

# %%
display.table(result.evidence.get("graph_breaks", []), ["reason", "where"])

# %%
display.buckets(result.evidence.get("buckets"))

# %% [markdown]
# ## Next
#
# Remove graph breaks first: each reason names the op or the Python construct that split the graph, and
# notebook 03's remedies apply to unsupported ops. Then pad real inputs up to the recommended bucket
# lengths, so that serving compiles only that many graphs. Open **05_profiling** to see where the time
# goes, op by op, on the device.
#
# The last cell prints the facts CI checks with nbval (`# NBVAL_CHECK_OUTPUT`): the stage's status and the
# evidence that depends only on the model and the parameters, never on timings or paths.

# %%
# NBVAL_CHECK_OUTPUT
print(display.summary(result))
