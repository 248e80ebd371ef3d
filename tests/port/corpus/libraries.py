"""Port corpus: CUDA-only libraries and kernels, and the accelerator Lightning is asked for."""
import bitsandbytes as bnb  # expect: bitsandbytes
import lightning as L
import pytorch_lightning as pl
import triton  # expect: triton
import triton.language as tl  # expect: triton
import xformers.ops  # expect: xformers
from apex.optimizers import FusedAdam  # expect: apex
from flash_attn import flash_attn_func  # expect: flash-attn
from torch.utils.cpp_extension import load_inline  # expect: cuda-extension


@triton.jit  # expect: triton
def add_kernel(x_ptr, n):
    offsets = tl.arange(0, 128)  # expect: triton
    return offsets


def attention(q, k, v):
    out = flash_attn_func(q, k, v, causal=True)  # expect: flash-attn
    return out + xformers.ops.memory_efficient_attention(q, k, v)  # expect: xformers


optimizer = FusedAdam([])  # expect: apex
linear = bnb.nn.Linear8bitLt(4, 4)  # expect: bitsandbytes
ext = load_inline(name="k", cpp_sources="", cuda_sources="")  # expect: cuda-extension

trainer = L.Trainer(accelerator="gpu", devices=1)  # expect: lightning-accelerator
trainer = pl.Trainer(accelerator="auto")  # expect: lightning-accelerator
trainer = L.Trainer(accelerator="cuda")  # expect: device-string
trainer = L.Trainer(accelerator="cpu")
fabric = L.Fabric(accelerator="gpu")  # expect: lightning-accelerator


def deepspeed_engine(model):
    import deepspeed  # expect: deepspeed

    return deepspeed.initialize(model=model)[0]  # expect: deepspeed
