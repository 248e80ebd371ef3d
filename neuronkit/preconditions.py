"""Input preconditions of registered device ops: S's `can_handle` checks, as small named predicates.

In S a registered op tries its implementations in priority order and asks each `can_handle(*args)` first,
outside any try (torch_neuronx/python_ops/base.py:715-804). A check can raise, and the user sees S's own
exception (`_grouped_mm`'s `ValueError("t must be divisible by 128")`), or reject the inputs: when every
implementation rejects them, a release build runs the op on the CPU (an input-dependent fallback) and
`TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1` (the dev build's default) raises instead.

`data/op_support.toml` `[[precondition]]` says which op each predicate guards, with its category, remedy
and source. The device's kernel (device/simulator/kernel.py) and the op audit (op_audit/recorder.py) both
ask `evaluate`, so they cannot disagree. A predicate reads the call's arguments by schema name; on fake
tensors (a weightless audit) it checks what shapes decide and says `unknown` for what only values could.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

import torch

from neuronkit import env

SKIP_VAR = "TORCH_NEURONX_SKIP_OP_PRECONDITIONS"
FALLBACK_ONLY_VAR = "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS"
GMM_ALIGN_VAR = "TORCH_NEURONX_ATEN_GMM_ALIGN"
NKI_GMM_ALIGN = 128  # the 2-D x 2-D (NKI) implementation's alignment, not configurable (grouped_mm.py:12,32)

Action = Literal["raise", "reject", "unknown"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a precondition decided about one call: `raise` (S raises `error` with `message`), `reject`
    (no implementation takes these inputs: CPU fallback, or an error under FALLBACK_ONLY) or `unknown`
    (the answer depends on tensor values a fake tensor does not have)."""

    action: Action
    message: str
    error: type[Exception] = ValueError


def skipped() -> bool:
    """TORCH_NEURONX_SKIP_OP_PRECONDITIONS=1 (exactly "1"; S torch_neuronx/utils.py:128-134)."""
    return env.flag(SKIP_VAR)


def fallback_only() -> bool:
    """TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 (exactly "1"; S python_ops/base.py:715-717)."""
    return env.flag(FALLBACK_ONLY_VAR)


def gmm_align() -> int:
    """The 2-D x 3-D grouped matmul's alignment: TORCH_NEURONX_ATEN_GMM_ALIGN, default 128 (S utils.py:119-125)."""
    return env.whole(GMM_ALIGN_VAR, 128)


def fallback_only_message(op: str) -> str:
    """S's error when every implementation rejected the inputs and FALLBACK_ONLY=1 (base.py:794-804); `op`
    is the registered name without `aten::`. No implementation failed, so the last one is `unknown`, and
    `_grouped_mm`'s `can_handle` returns a bare bool, so the details are `Unknown error`."""
    return ("CPU fallback disabled because TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1. "
            f"Operation {op} failed to be handled by any Neuron implementation (last implementation: unknown). "
            "Details: Unknown error")


def tagged(error: Exception, op: str, category: str) -> Exception:
    """`error` (S's exception, type and text unchanged) marked with the op and the policy category that
    refused the call, so `neuronkit check` can name the layer and the remedy (see `refusal`)."""
    error.neuron_refusal = (op, category)  # type: ignore[attr-defined]
    return error


def refusal(error: BaseException) -> tuple[str, str] | None:
    """(op, category) when `error`, or an exception it was raised from, is a precondition's refusal."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        found = getattr(error, "neuron_refusal", None)
        if found is not None:
            return found
        error = error.__cause__ or error.__context__
    return None


def _has_values(t: torch.Tensor) -> bool:
    """False for fake and meta tensors, whose values nobody knows."""
    return not (t.is_meta or isinstance(t, torch._subclasses.FakeTensor))


def validate_offs(offs: Any, t: int, align: int) -> Outcome | None:
    """S python_ops/grouped_mm.py:12-24 `validate_offs`: the token count and every offset a multiple of
    `align`, offsets within [0, t] and sorted, else ValueError (None: accepted or skipped)."""
    if skipped():
        return None
    if t % align != 0:
        return Outcome("raise", f"t must be divisible by {align}")
    if offs is None:  # S compares None with 0: Python's own TypeError
        return Outcome("raise", "'<' not supported between instances of 'NoneType' and 'int'", TypeError)
    if not _has_values(offs):
        return Outcome("unknown", f"the group offsets are data-dependent: each must be a multiple of {align}")
    if bool((offs < 0).any()) or bool((offs > t).any()):
        return Outcome("raise", f"offs must be between 0 and {t}")
    if bool((offs % align != 0).any()):
        return Outcome("raise", f"offs must be divisible by {align}")
    if len(offs) > 1 and bool((offs[1:] < offs[:-1]).any()):
        return Outcome("raise", "offs must be sorted")
    return None


def grouped_mm_offsets(call: dict[str, Any]) -> Outcome | None:
    """`aten::_grouped_mm`'s two implementations (S python_ops/grouped_mm.py:27-51), tried by priority:
    NKI (60) takes 2-D x 2-D and validates the offsets against `a.shape[1]` at 128; MLIR (40) takes
    2-D x 3-D (what transformers' MoE experts call) and validates against `a.shape[0]` at
    TORCH_NEURONX_ATEN_GMM_ALIGN. Other ranks: no implementation takes them."""
    a, b, offs = call["self"], call["mat2"], call.get("offs")
    if a.dim() == 2 and b.dim() == 2:
        return validate_offs(offs, a.shape[1], NKI_GMM_ALIGN)
    if a.dim() == 2 and b.dim() == 3:
        return validate_offs(offs, a.shape[0], gmm_align())
    return Outcome("reject", f"no implementation takes a {a.dim()}-D x {b.dim()}-D grouped matmul (only 2-D x 2-D "
                             "and 2-D x 3-D)")


def grouped_mm_compiled(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None,
                        bias: torch.Tensor | None = None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """`_grouped_mm` as S's compile path computes it, without asking can_handle
    (neuron_dynamo_backend/decompositions.py:1475-1497): a 2-D x 3-D call cuts the tokens into blocks of
    TORCH_NEURONX_ATEN_GMM_ALIGN rows and multiplies each block by one expert, the one whose group has
    ended before the block (counted in blocks). Exact for aligned groups; unaligned groups give wrong
    rows, and a token count that is not a multiple of the alignment fails the reshape. Other calls run
    PyTorch's kernel (S's decomposition returns NotImplemented for them)."""
    if a.dim() != 2 or b.dim() != 3 or offs is None:
        return torch.ops.aten._grouped_mm.default(a, b, offs, bias, out_dtype)
    align, tokens = gmm_align(), a.shape[0]
    blocks = a.reshape(tokens // align, align, a.shape[1])
    block_index = torch.arange(tokens // align, device=a.device)
    expert = (offs.unsqueeze(1) // align <= block_index).sum(0).clamp(0, b.shape[0] - 1)
    return torch.bmm(blocks, b[expert]).reshape(tokens, b.shape[2])


def topk_xla(call: dict[str, Any]) -> Outcome | None:
    """S python_ops/xla_ops/topk_xla.py:71-119 `TopKXLAImpl.can_handle`: k a positive int no larger than the
    dimension, the last dimension, largest=True, a float32/float16/bfloat16 input; else no implementation
    takes the call (S registers only this one under the XLA winner)."""
    x, k, dim, largest = call["self"], call.get("k"), call.get("dim", -1), call.get("largest", True)
    size = x.shape[dim] if x.dim() else 1
    if dim < 0:
        dim += max(x.dim(), 1)
    if not isinstance(k, int) or k <= 0 or k > size:
        return Outcome("reject", f"the XLA topk takes 0 < k <= {size} (k={k})")
    if dim != max(x.dim(), 1) - 1:
        return Outcome("reject", f"the XLA topk takes the last dimension only (dim={dim})")
    if not largest:
        return Outcome("reject", "the XLA topk takes largest=True only")
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return Outcome("reject", f"the XLA topk takes float32, float16 or bfloat16 (not {x.dtype})")
    return None


def fused_adamw_xla(call: dict[str, Any]) -> Outcome | None:
    """S python_ops/xla_ops/fused_adamw_xla.py:123: `assert grad_scale is None and found_inf is None` inside
    the kernel's try, so a GradScaler's step fails there and a release build runs it on the CPU."""
    if call.get("grad_scale") is not None or call.get("found_inf") is not None:
        return Outcome("reject", "the XLA fused AdamW asserts grad_scale and found_inf are None (a GradScaler)")
    return None


def arithmetic_xla(call: dict[str, Any]) -> Outcome | None:
    """S python_ops/xla_ops/arithmetic_xla.py:13-40: the other operand a tensor or an int, float or bool."""
    other = call.get("other")
    if isinstance(other, complex):
        return Outcome("reject", "the XLA arithmetic kernels take a tensor, int, float or bool operand (not complex)")
    return None


# How S's torch.compile path computes an op whose eager path has preconditions, by ATen base name.
COMPILED: dict[str, Callable[..., Any]] = {"_grouped_mm": grouped_mm_compiled}

PREDICATES: dict[str, Callable[[dict[str, Any]], Outcome | None]] = {
    "grouped_mm_offsets": grouped_mm_offsets,
    "topk_xla": topk_xla,
    "fused_adamw_xla": fused_adamw_xla,
    "arithmetic_xla": arithmetic_xla,
}


def evaluate(predicate: str, call: dict[str, Any]) -> Outcome | None:
    """The named predicate's outcome for a call (arguments by schema name); None when it accepts the call.
    TORCH_NEURONX_SKIP_OP_PRECONDITIONS=1 skips the value checks S skips (not the rank dispatch)."""
    return PREDICATES[predicate](call)
