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
# # 08 · Write a kernel: replace one op of Qwen3 with an NKI kernel
#
# TorchNeuron runs standard ops through the compiler, and lets you write the ones that matter yourself
# with the **Neuron Kernel Interface (NKI)**: a kernel in `nki.language`, registered with
# `torch_neuronx.nki_op`, runs eagerly on `neuron` and under `torch.compile`.
#
# This lesson swaps the `SiLU(gate) * up` of the bundled Qwen3's MLP for an NKI kernel, checks it against
# PyTorch, finds it in the op audit and the profile, and breaks one of Trainium's rules on purpose.
# Without the Neuron SDK, `import torch` gives you neuronkit's `nki`: a CPU interpreter that enforces the
# NeuronCore's tile rules (docs/nki.md). It is a standalone lesson, not part of `neuronkit run`.

# %% tags=["parameters"]
# Parameters (papermill can inject other values in a cell right after this one).
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # load models from local files only, never from the Hub
os.environ.setdefault("TQDM_DISABLE", "1")    # no progress bars in executed notebooks

model: str = "tiny-qwen3"  # the bundled Qwen3 (its MLP is SiLU(gate) * up)
seq_len: int = 160         # tokens: more than 128, so the kernel needs two SPMD programs and a mask
profile_steps: int = 2     # profiled forward passes

# %% [markdown]
# ## Where `nki` comes from
#
# With the Neuron SDK installed you get the real `nki`. Without it (PyPI's `nki` and `torch-neuronx` are
# placeholders that refuse to import), `import torch` loads the simulated `neuron` device, which also
# provides `nki`, `neuronxcc.nki` and `torch_neuronx.nki_op`.

# %%
import torch
import nki
import nki.language as nl
from torch_neuronx import nki_op

import neuronkit

print(neuronkit.detect())
print("nki is neuronkit's interpreter:", getattr(nki, "__neuronkit_simulated__", False))
print("tile limits: pmax", nl.tile_size.pmax, "| gemm moving fmax", nl.tile_size.gemm_moving_fmax)

# %% [markdown]
# ## The kernel
#
# A NeuronCore computes on tiles in its on-chip SBUF: **128 partitions** (the first dimension of a tile)
# by a free dimension. The kernel below handles one tile of 128 tokens per program; a launch grid of
# `ceil(tokens / 128)` programs covers every token, and `nl.program_id(0)` tells each program which rows
# are its own. The last tile is partial: the `mask` keeps every load, computation and store inside the
# tensor (an out-of-bounds index is an error on the device, not a silent clip).

# %%
@nki.jit
def silu_mul_kernel(gate, up):
    n, f = gate.shape
    out = nl.ndarray((n, f), dtype=gate.dtype, buffer=nl.shared_hbm)
    i_p = nl.program_id(0) * nl.tile_size.pmax + nl.arange(nl.tile_size.pmax)[:, None]
    i_f = nl.arange(f)[None, :]
    rows = i_p < n
    g = nl.load(gate[i_p, i_f], mask=rows)   # HBM -> SBUF
    u = nl.load(up[i_p, i_f], mask=rows)
    y = nl.multiply(nl.silu(g, mask=rows), u, mask=rows)
    nl.store(out[i_p, i_f], value=y, mask=rows)  # SBUF -> HBM
    return out


@nki_op("lesson08::silu_mul", mutates_args={})
def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    flat_gate, flat_up = gate.reshape(-1, gate.shape[-1]), up.reshape(-1, up.shape[-1])
    programs = -(-flat_gate.shape[0] // nl.tile_size.pmax)
    return silu_mul_kernel[programs](flat_gate, flat_up).reshape(gate.shape)

# %% [markdown]
# ## Parity against PyTorch, kernel alone

# %%
torch.manual_seed(0)
gate = torch.randn(seq_len, 128, device="neuron")
up = torch.randn(seq_len, 128, device="neuron")
kernel_error = (silu_mul(gate, up) - torch.nn.functional.silu(gate) * up).abs().max().item()
print(f"max |kernel - torch| = {kernel_error:.2e}")

# %% [markdown]
# ## Into the model
#
# Qwen3's MLP computes `down_proj(act_fn(gate_proj(x)) * up_proj(x))`. We replace the middle with the
# NKI op in every layer and compare the logits with the unchanged model on the CPU.

# %%
import types

import transformers
from neuronkit.models import load_model

transformers.logging.disable_progress_bar()


def nki_mlp_forward(self, x):
    return self.down_proj(silu_mul(self.gate_proj(x), self.up_proj(x)))


reference = load_model(model).eval()
patched = load_model(model).eval()
for layer in patched.model.layers:
    layer.mlp.forward = types.MethodType(nki_mlp_forward, layer.mlp)

input_ids = torch.randint(0, reference.config.vocab_size, (1, seq_len), generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    expected = reference(input_ids).logits
    patched.to("neuron")
    got = patched(input_ids.to("neuron")).logits.cpu()
logits_error = (got - expected).abs().max().item()
same_tokens = bool((got.argmax(-1) == expected.argmax(-1)).all())
print(f"max |logits with NKI on neuron - CPU reference| = {logits_error:.2e}; same next tokens: {same_tokens}")

# %% [markdown]
# ## One compilation per shape, and under `torch.compile`
#
# Eagerly, each distinct (shapes, dtypes, constant arguments) of a kernel compiles once and is then served
# from the NEFF cache. Under `torch.compile` the kernel is one node of the graph.

# %%
compiled = torch.compile(patched, backend="neuron")
with torch.no_grad():
    compiled_error = (compiled(input_ids.to("neuron")).logits.cpu() - expected).abs().max().item()
metrics = torch.neuron.get_dynamo_metrics()
print(f"compiled graphs: {len(metrics)}; max |compiled - CPU reference| = {compiled_error:.2e}")
trace = next(iter(silu_mul_kernel.traces.values()))
print(f"peak SBUF per partition in the kernel: {trace.peak_sbuf} bytes of "
      f"{neuronkit.nki.hardware.core().sbuf_bytes_per_partition} (trn2)")

# %% [markdown]
# ## The op audit sees it
#
# The audit records `lesson08::silu_mul` as one device op (a custom NKI kernel is native by construction)
# and lists it under `nki_ops`; the report shows that list. Its row carries `nki_est_us`: an ESTIMATE of one
# call's time on a trn2 NeuronCore, from the instructions the kernel executed (docs/nki.md, "Estimated engine
# time"), with the busy time per engine in `nki_engine_us`.

# %%
report = neuronkit.audit(patched.to("cpu"), (input_ids,))
print("custom NKI ops:", report.summary.nki_ops)
print(report.op("lesson08::silu_mul"))

# %% [markdown]
# ## The profiler sees it
#
# Each launch is a device op `nki::silu_mul_kernel` in the profile, next to the matmuls it sits between.
# Its `device_time_us` is the interpreter's time on this CPU; `nki_est_us` beside it is the estimate on trn2.

# %%
import matplotlib.pyplot as plt
from neuronkit import profiling

patched.to("neuron")
summary = profiling.profile(patched, {"input_ids": input_ids.to("neuron")}, steps=profile_steps, warmup=3)
top = summary.head(8)
colors = ["tab:orange" if name.startswith("nki::") else "tab:blue" for name in top["name"]]
fig, ax = plt.subplots(figsize=(7, 3))
ax.barh(top["name"][::-1], top["device_time_us"][::-1], color=colors[::-1])
ax.set_xlabel("device time, µs (simulated: CPU time)")
ax.set_title("Hottest ops; the NKI kernel in orange")
fig.tight_layout()
plt.show()
nki_row = summary[summary["name"] == "nki::silu_mul_kernel"].iloc[0]
print(f"nki::silu_mul_kernel: {int(nki_row.calls)} calls, classification {nki_row.classification}")
print(f"host time {nki_row.device_time_us:,.0f} µs (the interpreter); estimated engine time on trn2 "
      f"{nki_row.nki_est_us:.3g} µs")

# %% [markdown]
# ## Breaking a rule on purpose
#
# A first attempt often loads the whole tensor at once. With more than 128 tokens that tile would span
# more partitions than SBUF has; the Neuron compiler refuses it, and so does the interpreter, saying why.

# %%
from neuronkit.nki import NkiRuleError


@nki.jit
def silu_mul_one_tile(gate, up):
    out = nl.ndarray(gate.shape, dtype=gate.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.silu(nl.load(gate)) * nl.load(up))
    return out


try:
    silu_mul_one_tile(gate, up)
    rule_error = None
except NkiRuleError as err:
    rule_error = str(err)
print(rule_error)

# %% [markdown]
# ## Start from NKI-lib
#
# [NKI-lib](https://github.com/aws-neuron/nki-library) holds Trainium-tuned kernels (attention, MoE, RoPE,
# norms, cumsum, top-k), each beside a PyTorch reference (`*_torch.py`). It is written in today's NKI API:
# tensors allocated with `nl.ndarray(shape, dtype, buffer=nl.sbuf | nl.psum | nl.shared_hbm)` and ISA
# instructions that write into `dst=` (`nisa.dma_copy`, `nisa.memset`, `nisa.tensor_tensor_scan`, ...).
# With a checkout on `PYTHONPATH` (its `src/nkilib_src` directory), the cell below runs its cumsum kernel
# on `neuron` tensors against its reference, with the tolerance of NKI-lib's GETTING_STARTED.md. Without
# one, it runs the same steps on a cumsum kernel written here in the same style. docs/nki.md lists which
# NKI-lib kernels run and which instructions are not interpreted yet.

# %%
import importlib.util

import nki.isa as nisa


@nki.jit
def cumsum_rows(x):
    """Cumulative sum along the last axis of [rows, cols]: 128 rows per tile, the running total of each
    row carried from one chunk of columns to the next by the scan's `initial` operand."""
    rows, cols = x.shape
    chunk = 512
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0 in nl.affine_range((rows + 127) // 128):
        r = min(128, rows - r0 * 128)
        carry = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=carry, value=0.0)
        ones = nl.ndarray((128, chunk), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=ones, value=1.0)
        for c0 in nl.sequential_range((cols + chunk - 1) // chunk):
            c = min(chunk, cols - c0 * chunk)
            rows_hbm = nl.ds(r0 * 128, r)
            cols_hbm = nl.ds(c0 * chunk, c)
            tile = nl.ndarray((128, chunk), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile[0:r, 0:c], src=x[rows_hbm, cols_hbm])
            total = nl.ndarray((128, chunk), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor_scan(dst=total[0:r, 0:c], data0=ones[0:r, 0:c], data1=tile[0:r, 0:c],
                                    initial=carry[0:r, :], op0=nl.multiply, op1=nl.add)
            nisa.tensor_copy(dst=carry[0:r, :], src=total[0:r, c - 1:c])
            nisa.dma_copy(dst=out[rows_hbm, cols_hbm], src=total[0:r, 0:c])
    return out


if importlib.util.find_spec("nkilib") is not None:
    from nkilib.core.cumsum.cumsum import cumsum as cumsum_kernel
    from nkilib.core.cumsum.cumsum_torch import cumsum_torch_ref

    source = "NKI-lib's nkilib.core.cumsum"

    def cumsum_reference(x):
        return cumsum_torch_ref(x)["output_0"]
else:
    cumsum_kernel, source = cumsum_rows, "this lesson's cumsum_rows (no NKI-lib checkout on PYTHONPATH)"

    def cumsum_reference(x):
        return torch.cumsum(x, dim=-1)

x = torch.randn(160, 700)
got = cumsum_kernel(x.to("neuron")).cpu()
nkilib_error = (got - cumsum_reference(x)).abs().max().item()
nkilib_close = torch.allclose(got, cumsum_reference(x), rtol=1e-2, atol=1e-2)
print(f"{source}: max error {nkilib_error:.1e}; within rtol=atol=1e-2: {nkilib_close}")

# %% [markdown]
# The same kernel as a TorchNeuron user wires it in: an `nki_op` with a backward (the gradient of a
# cumulative sum is the reversed cumulative sum of the incoming gradient), eager and under
# `torch.compile(backend="neuron")`.

# %%
@nki_op("lesson08::cumsum", mutates_args={})
def nki_cumsum(x: torch.Tensor) -> torch.Tensor:
    return cumsum_kernel(x)


def cumsum_backward(ctx, grad):
    return nki_cumsum(grad.flip(-1)).flip(-1)


nki_cumsum.register_autograd(cumsum_backward)

leaf = torch.randn(8, 300, device="neuron", requires_grad=True)
weights = torch.randn(8, 300, device="neuron")
(nki_cumsum(leaf) * weights).sum().backward()
grad_error = (leaf.grad.cpu() - weights.cpu().flip(-1).cumsum(-1).flip(-1)).abs().max().item()
compiled_cumsum = torch.compile(nki_cumsum, backend="neuron")
compiled_cumsum_error = (compiled_cumsum(leaf.detach()).cpu() - leaf.detach().cpu().cumsum(-1)).abs().max().item()
print(f"backward max error {grad_error:.1e}; compiled max error {compiled_cumsum_error:.1e}; "
      f"both within 1e-4: {max(grad_error, compiled_cumsum_error) < 1e-4}")

# %% [markdown]
# ## Key numbers
#
# What to take away: the kernel matches PyTorch to float32 rounding, the model's next tokens do not change,
# and the rule violation names the limit and the fix.

# %%
print(f"kernel max error        {kernel_error:.1e}")
print(f"logits max error        {logits_error:.1e} (same next tokens: {same_tokens})")
print(f"compiled max error      {compiled_error:.1e}")
print(f"NKI launches profiled   {int(nki_row.calls)} (estimated {nki_row.nki_est_us:.3g} µs on trn2 in all)")
print(f"rule violation caught   {rule_error is not None}")
print(f"NKI-lib-style cumsum    {nkilib_error:.1e} ({source})")

# %% [markdown]
# ## Try it
#
# Switch the kernel's tiles to bfloat16, or write one for RMSNorm
# (`nl.mean(nl.square(x), axis=1, keepdims=True)`, `nl.rsqrt`) and check it the same way.
#
# ## Recap
#
# - An NKI kernel is registered with `torch_neuronx.nki_op` and runs eagerly on `neuron` and under
#   `torch.compile`, one compilation per shape.
# - The op audit and the profiler see it as a kernel of its own, with an estimated engine time on trn2.
# - A tile wider than SBUF's 128 partitions is refused, by the compiler and by the interpreter, naming the
#   limit and the fix.
#
# ## Next
#
# docs/nki.md lists the subset of `nki.language` the interpreter runs; notebook 09 ports a training script.
