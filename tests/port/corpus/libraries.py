"""Port corpus: CUDA-only libraries and kernels."""
import bitsandbytes as bnb  # expect: bitsandbytes
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
