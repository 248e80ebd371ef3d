"""The CPU baseline's `neuronkit check` step: `cpu`, the CPU reference every device step is compared with
(run here, or read back from the CPU baseline's file)."""

from __future__ import annotations

from typing import Any

import torch

from neuronkit.calling import call, same_draws
from neuronkit.graph_compile import compare
from neuronkit.pipeline.check import CheckRun, gradients_for
from neuronkit.pipeline.host_products import device_products
from neuronkit.pipeline.reference import Reference
from neuronkit.pipeline.session import autocast
from neuronkit.stages.cpu_baseline.evidence import CpuCheck, ReferenceOutput
from neuronkit.timing import interleaved_medians
from neuronkit.units import format_ms


def cpu_reference(model: torch.nn.Module, inputs: Any, *, dtype: torch.dtype = torch.float32,
                  freeze_embeddings: bool = False, **extra: Any) -> Reference:
    """The CPU model's named outputs on `inputs`, and the loss and gradient norm of one backward from
    them (what a compiled training step is held to); the model's gradients are cleared afterwards.
    A bfloat16/float16 `dtype` runs it under CPU autocast of that dtype, as the device runs under its
    own; `freeze_embeddings` takes no gradient for the embeddings and head (`gradients_for`)."""
    with gradients_for(model, freeze_embeddings), device_products(dtype):
        with autocast("cpu", dtype), same_draws():
            out = call(model, inputs, **extra)
            loss = compare.loss_of(out)
        loss.backward()
        norm = compare.grad_norm(model)
    outputs = {name: t.detach() for name, t in compare.named_outputs(out)}
    named = inputs if isinstance(inputs, dict) else dict(compare.named_outputs(inputs))
    return Reference(named, outputs, loss.item(), norm)


def run_cpu(run: CheckRun, record: CpuCheck) -> tuple[str, str]:
    """The CPU reference: read back from the CPU baseline's file, or run here (outputs, loss, gradient
    norm, and the CPU forward's time)."""
    s = run.session
    record.reused = run.reference is not None
    if run.reference is None:
        run.reference = cpu_reference(s.model, s.inputs, dtype=s.dtype, freeze_embeddings=s.freeze, **s.extra)
    run.cpu_out = run.reference.outputs
    record.outputs = [ReferenceOutput(n, list(t.shape), str(t.dtype).removeprefix("torch."))
                      for n, t in run.cpu_out.items()]
    record.grad_norm = run.reference.grad_norm
    if record.reused:
        record.loss = run.reference.loss
        return "pass", f"{len(record.outputs)} output(s) read from the CPU baseline's reference"
    with torch.no_grad(), s.cpu_mode():
        record.forward_ms = interleaved_medians({"cpu": lambda: call(s.model, s.inputs, **s.extra)},
                                                runs=5, warmup=2)["cpu"]
    loss = run.cpu_out.get("loss")
    record.loss = None if loss is None else loss.item()
    record.threads = torch.get_num_threads()
    record.parameters = sum(p.numel() for p in s.model.parameters())
    return "pass", (f"{len(record.outputs)} output(s), CPU forward {format_ms(record.forward_ms)} on "
                    f"{record.threads} threads")
