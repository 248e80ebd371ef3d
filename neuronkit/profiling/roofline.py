"""A roofline ESTIMATE of an op's time on a Trainium2 NeuronCore, from its FLOPs and bytes moved.

time = max(FLOPs / peak FLOP/s for the op's dtype, bytes in+out / HBM bandwidth), with the published
per-chip peaks of `neuronkit/data/trainium_hardware.toml` divided by the chip's 8 physical cores and multiplied by
the logical-core size (LNC). FLOPs are counted only for matmul-class ops (mm, bmm, addmm, baddbmm,
addmv, linear, convolution, scaled-dot-product attention); every other op is treated as pure data
movement, which is what elementwise and reduction ops are at any realistic arithmetic intensity. It is
a lower bound that ignores launch latency and on-chip traffic: an estimate, never a measurement.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Literal

from neuronkit.policy import base_name
from neuronkit.resources import data_toml

Bound = Literal["compute", "memory"]
_ITEMSIZE = {"torch.float64": 8, "torch.float32": 4, "torch.bfloat16": 2, "torch.float16": 2}
_PEAK_KEY = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float8_e4m3fn": "fp8",
             "torch.float8_e5m2": "fp8"}  # anything else uses the FP32 peak


@dataclass(frozen=True, slots=True)
class CorePeaks:
    """Peak throughput of one logical NeuronCore (LNC physical cores)."""

    chip: str
    logical_nc_config: int
    flops_per_s: dict[str, float]  # by dtype key: fp8, bf16, fp16, fp32
    hbm_bytes_per_s: float
    source: str

    def flops_for(self, dtype: str) -> float:
        """Peak FLOP/s for a torch dtype string such as ``torch.bfloat16``."""
        return self.flops_per_s[_PEAK_KEY.get(dtype, "fp32")]


@dataclass(frozen=True, slots=True)
class Estimate:
    flops: int
    bytes_moved: int
    compute_ns: float
    memory_ns: float

    @property
    def ns(self) -> float:
        """The roofline time: the slower of compute and memory."""
        return max(self.compute_ns, self.memory_ns)

    @property
    def bound(self) -> Bound:
        return "compute" if self.compute_ns > self.memory_ns else "memory"


@functools.lru_cache(maxsize=None)
def core_peaks(logical_nc_config: int | None = None) -> CorePeaks:
    """Trainium2 peaks for one logical NeuronCore; LNC defaults to the table's trn2 default (2)."""
    table = data_toml("trainium_hardware.toml")
    trn2 = table["chips"]["trn2"]
    lnc = logical_nc_config or trn2["default_logical_nc_config"]
    share = lnc / trn2["physical_cores_per_chip"]
    return CorePeaks(
        chip=trn2["chip"], logical_nc_config=lnc,
        flops_per_s={k: v * 1e12 * share for k, v in trn2["dense_tflops"].items()},
        hbm_bytes_per_s=trn2["hbm_bytes_per_s"] * share,
        source=table["sources"][trn2["cite"]["dense_tflops"]]["url"])


def estimate(name: str, shapes: tuple, dtypes: tuple, bytes_in: int, bytes_out: int,
             peaks: CorePeaks) -> Estimate:
    """The roofline estimate of one op call from its input shapes/dtypes and the bytes it read and wrote."""
    flops = op_flops(name, shapes, dtypes, bytes_out)
    moved = bytes_in + bytes_out
    dtype = dtypes[0] if dtypes else "torch.float32"
    return Estimate(flops, moved, flops / peaks.flops_for(dtype) * 1e9, moved / peaks.hbm_bytes_per_s * 1e9)


def op_flops(name: str, shapes: tuple, dtypes: tuple, bytes_out: int) -> int:
    """Multiply-accumulate FLOPs (2 per MAC) of a matmul-class op; 0 for every other op."""
    count = _FLOPS.get(base_name(name))
    if count is None:
        return 0
    try:
        return int(count(shapes, dtypes, bytes_out))
    except (IndexError, ValueError, ZeroDivisionError):  # an overload with an unexpected signature
        return 0


def _mm(shapes, dtypes, out) -> int:  # (m, k) @ (k, n)
    (m, k), (_, n) = shapes[0], shapes[1]
    return 2 * m * k * n


def _bmm(shapes, dtypes, out) -> int:  # (b, m, k) @ (b, k, n)
    (b, m, k), (_, _, n) = shapes[0], shapes[1]
    return 2 * b * m * k * n


def _addmv(shapes, dtypes, out) -> int:  # bias + (m, n) @ (n,)
    m, n = shapes[1]
    return 2 * m * n


def _linear(shapes, dtypes, out) -> int:  # (..., k) @ (n, k).T
    n, k = shapes[1]
    return 2 * math.prod(shapes[0][:-1]) * k * n


def _convolution(shapes, dtypes, out) -> int:
    """Each output element is a dot product over weight[o] (in_channels/groups x kernel)."""
    out_elements = out // _ITEMSIZE.get(dtypes[0], 4)
    return 2 * out_elements * math.prod(shapes[1][1:])


def _attention(shapes, dtypes, out) -> int:
    """softmax(q k^T) v: q (..., L, E), k (..., S, E), v (..., S, Ev)."""
    q, k, v = shapes[0], shapes[1], shapes[2]
    return 2 * math.prod(q[:-1]) * k[-2] * (q[-1] + v[-1])


_FLOPS: dict[str, Callable[[tuple, tuple, int], int]] = {
    "mm": _mm,
    "bmm": _bmm,
    "addmm": lambda s, d, o: _mm(s[1:], d, o),
    "baddbmm": lambda s, d, o: _bmm(s[1:], d, o),
    "addmv": _addmv,
    "linear": _linear,
    "convolution": _convolution,
    "_convolution": _convolution,
    "scaled_dot_product_attention": _attention,
    "_scaled_dot_product_fused_attention_overrideable": _attention,
    "_scaled_dot_product_flash_attention_for_cpu": _attention,
}
