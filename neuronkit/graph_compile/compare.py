"""Numerics for the parity checks: moving a model and its inputs, naming outputs, errors and tolerances.

Tolerances depend on the precision the device computes in: fp32 runs the same kernels as the CPU
reference and must agree tightly; bf16/fp16 under `torch.autocast('neuron')` (behaviour doc §5) round
every matmul, so they are compared with looser bounds against a CPU reference run under CPU autocast of
the same dtype.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Iterable

import torch

_EPS = 1e-12


@dataclass(frozen=True)
class Tolerance:
    """How close the device must stay to its reference."""

    atol: float  # absolute slack on every element
    rtol: float  # relative to the largest reference magnitude of the output
    min_top1: float  # top-1 token agreement below this is a warning
    train_rtol: float  # relative error allowed on losses and gradient norms


# Both sides compute alike (`neuronkit.checks`: in a bfloat16/float16 run the CPU reference runs under CPU
# autocast of the same dtype, on the same weights), so these bound what the device may add: the ops its
# autocast policy (CUDA's lists, S: torch_neuronx/csrc/amp/autocast_mode.cpp) casts differently from the
# CPU's, and accumulation order, each one rounding of the dtype (bf16: 2^-8, fp16: 2^-11) carried through
# a forward, a backward and a few SGD steps. They do not hold a bf16 run to float32 numbers: a random
# model's SGD step can be large enough that one rounding moves the next loss by more than 5%.
TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float32: Tolerance(atol=1e-4, rtol=1e-4, min_top1=1.0, train_rtol=1e-3),
    torch.bfloat16: Tolerance(atol=1e-2, rtol=5e-2, min_top1=0.9, train_rtol=5e-2),
    torch.float16: Tolerance(atol=1e-3, rtol=1e-2, min_top1=0.95, train_rtol=2e-2),
}


def tolerance_for(dtype: torch.dtype) -> Tolerance:
    """The tolerance for computing in `dtype` (64-bit types are emulated in 32 bit: fp32 bounds)."""
    return TOLERANCES.get(dtype, TOLERANCES[torch.float32])


def move_inputs(inputs: Any, device: str | torch.device) -> Any:
    """Tensors (also inside dicts, lists and tuples) moved to `device`."""
    if isinstance(inputs, torch.Tensor):
        return inputs.to(device)
    if isinstance(inputs, dict):
        return {k: move_inputs(v, device) for k, v in inputs.items()}
    if isinstance(inputs, (list, tuple)):
        return type(inputs)(move_inputs(v, device) for v in inputs)
    return inputs


def to_device(model: torch.nn.Module, device: str | torch.device) -> tuple[torch.nn.Module, list[list[str]]]:
    """`model.to(device)`, with parameters that were shared (tied) before the move shared again after.

    Returns the model and the groups of parameter names the move had untied. Moving to `neuron` keeps
    Parameter objects (CPU and neuron tensors are shallow-copy compatible, as on the real device), so
    this is empty unless the model's own `_apply` replaces parameters; those groups are re-tied."""
    groups: dict[int, list[tuple[torch.nn.Module, str, str]]] = {}
    for module_name, module in model.named_modules(remove_duplicate=False):
        for name, param in module._parameters.items():
            if param is not None:
                full = f"{module_name}.{name}" if module_name else name
                groups.setdefault(id(param), []).append((module, name, full))
    model = model.to(device)
    untied = []
    for members in groups.values():
        first_module, first_name, _ = members[0]
        shared = first_module._parameters[first_name]
        if any(module._parameters[name] is not shared for module, name, _ in members):
            untied.append(sorted({full for _, _, full in members}))
            for module, name, _ in members:
                module._parameters[name] = shared
    return model, untied


def device_copy(model: torch.nn.Module, device: str | torch.device) -> tuple[torch.nn.Module, list[list[str]]]:
    """A copy of `model` on `device`, made tensor by tensor (never a second full copy on the CPU), then
    moved with `to_device` (a no-op for the tensors; the model's own `_apply` still runs, and the
    groups it untied are returned)."""
    memo: dict[int, Any] = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        if id(tensor) not in memo:
            moved = tensor.detach().to(device)
            memo[id(tensor)] = (torch.nn.Parameter(moved, requires_grad=tensor.requires_grad)
                                if isinstance(tensor, torch.nn.Parameter) else moved)
    return to_device(copy.deepcopy(model, memo), device)


def named_outputs(output: Any, prefix: str = "") -> list[tuple[str, torch.Tensor]]:
    """The tensors of a model output with stable names (`logits`, `loss`, `output[0]`, ...)."""
    if isinstance(output, torch.Tensor):
        return [(prefix or "output", output)]
    if isinstance(output, dict):  # also transformers' ModelOutput
        items: Iterable = output.items()
    elif isinstance(output, (list, tuple)):
        items = ((f"[{i}]" if prefix else f"output[{i}]", v) for i, v in enumerate(output))
    else:
        return []
    found = []
    for key, value in items:
        key = str(key)
        name = f"{prefix}{key}" if key.startswith("[") else (f"{prefix}.{key}" if prefix else key)
        found.extend(named_outputs(value, name))
    return found


def compare_outputs(reference: Any, candidate: Any, tol: Tolerance) -> list[dict[str, Any]]:
    """Per output: max absolute error, max error relative to the reference's largest magnitude, ok."""
    got = dict(named_outputs(candidate))
    rows = []
    for name, ref in named_outputs(reference):
        if name not in got:
            rows.append({"name": name, "ok": False, "error": "missing from the device output"})
            continue
        ref = ref.detach().to("cpu")
        out = got[name].detach().to("cpu")
        if ref.shape != out.shape:
            rows.append({"name": name, "ok": False, "error": f"shape {tuple(out.shape)} != {tuple(ref.shape)}"})
            continue
        if not ref.is_floating_point():
            same = bool(torch.equal(ref, out))
            rows.append({"name": name, "shape": list(ref.shape), "max_abs_err": 0.0 if same else None,
                         "exact": True, "ok": same})
            continue
        ref, out = ref.float(), out.float()
        # A NaN or infinity the CPU reference has too, in the same place, is the model's (or its inputs'), not
        # the device's: compared as equal. Any other non-finite value is a mismatch.
        both = torch.isfinite(ref) & torch.isfinite(out)
        shared = ~torch.isfinite(ref) & ((ref == out) | (torch.isnan(ref) & torch.isnan(out)))
        diff = (out - ref)[both].abs().max().item() if bool(both.any()) else 0.0
        scale = ref[both].abs().max().item() if bool(both.any()) else 0.0
        rows.append({
            "name": name, "shape": list(ref.shape), "max_abs_err": diff, "max_rel_err": diff / max(scale, _EPS),
            "atol": tol.atol, "rtol": tol.rtol, "ok": bool((both | shared).all()) and diff <= tol.atol + tol.rtol * scale,
        })
    return rows


def top1_agreement(reference: Any, candidate: Any) -> float | None:
    """Share of positions whose most likely token agrees (None when the output has no `logits`)."""
    ref = dict(named_outputs(reference)).get("logits")
    got = dict(named_outputs(candidate)).get("logits")
    if ref is None or got is None or ref.shape != got.shape or ref.dim() < 2:
        return None
    same = ref.detach().to("cpu").argmax(-1) == got.detach().to("cpu").argmax(-1)
    return same.float().mean().item()


# What a model without a loss (a base model, a head neuronkit has no labels for) is trained on: the mean square
# of its first floating-point output. Not a task's objective, but a scalar whose backward reaches every
# parameter that output depends on, which is what a training step on the device exercises.
SURROGATE = "surrogate: mean square of {}"


def loss_of(output: Any) -> torch.Tensor:
    """The model's own `loss` when it returns one, else the surrogate loss (SURROGATE) of its first floating
    output that requires grad."""
    loss = output.get("loss") if isinstance(output, dict) else None
    if isinstance(loss, torch.Tensor):
        return loss
    for _, value in named_outputs(output):
        if value.is_floating_point() and value.requires_grad:
            return value.float().pow(2).mean()
    raise ValueError("the model output has no loss and no floating-point tensor that requires grad")


def loss_source(output: Any) -> str:
    """What `loss_of` trains on for this output: "model" (its own loss) or the SURROGATE of the output named."""
    if isinstance(output, dict) and isinstance(output.get("loss"), torch.Tensor):
        return "model"
    name = next((name for name, value in named_outputs(output) if value.is_floating_point()), "no output")
    return SURROGATE.format(name)


def grad_norm(model: torch.nn.Module) -> float:
    """The total 2-norm of all parameter gradients (computed on the host)."""
    norms = [p.grad.detach().to("cpu").float().norm() for p in model.parameters() if p.grad is not None]
    return torch.stack(norms).norm().item() if norms else 0.0


def relative_error(value: float, reference: float) -> float:
    return abs(value - reference) / max(abs(reference), _EPS)
