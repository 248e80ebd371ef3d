"""What notebook 01 calls: the CPU baseline, which saves the reference outputs the eager (02) and compile (04)
stages read (`neuronkit.pipeline.reference.Reference`), and what the notebook says next."""

from __future__ import annotations

import math
from typing import Any

import torch

from neuronkit import slicing
from neuronkit.calling import call, greedy
from neuronkit.evidence import load as load_record
from neuronkit.pipeline.config import Params
from neuronkit.pipeline.execute import Recording, run_stage
from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.pipeline.reference import Reference
from neuronkit.pipeline.session import Session, load, ran_on, reference_path, run_slice
from neuronkit.stages.cpu_baseline import CpuBaselineOptions
from neuronkit.stages.cpu_baseline.evidence import CpuBaselineEvidence, FillMask, Generation, MaskGuess, WeightsInfo
from neuronkit.stages.cpu_baseline.steps import cpu_reference
from neuronkit.timing import interleaved_medians
from neuronkit.units import format_ms
from neuronkit.workbook.lesson import after

MASK = "[MASK]"  # where a masked-LM prompt has its gap; replaced by the tokenizer's own mask token


def run(params: Params, **options: Any) -> StageResult[CpuBaselineEvidence]:
    """Time the forward pass on the CPU (median of `timing_steps` after a warm-up), record its loss, and
    sample the model on `prompt` (`CpuBaselineOptions`: `prompt`, `max_new_tokens`, `timing_steps`).

    `fail` when the CPU logits are not finite: a model broken on the CPU cannot be migrated yet."""
    return run_stage("cpu_baseline", params, options, _baseline)


def _baseline(params: Params, rec: Recording[CpuBaselineEvidence]) -> None:
    opts = params.config.of(CpuBaselineOptions)
    session = load(params)
    timing_steps = slicing.repeats(run_slice(params), "cpu_timing_steps", opts.timing_steps)
    with torch.inference_mode():
        out = call(session.model, session.inputs)
        forward_ms = interleaved_medians({"cpu": lambda: call(session.model, session.inputs)},
                                         runs=timing_steps)["cpu"]
    loss = float(out.loss) if getattr(out, "loss", None) is not None else None
    logits = out.logits if getattr(out, "logits", None) is not None else out[0]  # base models: hidden states
    reference = save_reference(params, session)
    evidence = CpuBaselineEvidence(forward_ms=forward_ms, logits_shape=list(logits.shape), loss=loss,
                                   grad_norm=reference.grad_norm, threads=torch.get_num_threads(),
                                   reference_path=str(reference_path(params)),
                                   weights=load_record(WeightsInfo, session.weights.to_dict()),
                                   model_slice=session.model_slice)
    if session.tokenizer is not None and session.kind == "causal_lm":
        evidence.generate = greedy_generate(session, opts.prompt, opts.max_new_tokens)
    elif session.tokenizer is not None and session.kind == "masked_lm":
        evidence.fill_mask = fill_mask(session, opts.prompt)
    rec.evidence = evidence
    if not torch.isfinite(logits).all() or (loss is not None and not math.isfinite(loss)):
        rec.status, rec.summary = "fail", "The CPU forward pass produced NaN or infinite values."
        return
    rec.summary = (f"CPU forward {format_ms(forward_ms)} (median of {timing_steps}) on {evidence.threads} CPU "
                   "threads" + (f", loss {loss:.4f}" if loss is not None else "") + ran_on(session.model_slice))
    if session.weights.warnings():  # a head dropped or left random: never a silent pass
        rec.status = "warn"
        rec.summary = "; ".join(session.weights.warnings()) + ". " + rec.summary


def save_reference(params: Params, session: Session) -> Reference:
    """Compute and save the CPU reference the device stages compare with (the check's own: the run's
    model, under CPU autocast of a bfloat16/float16 run's dtype as the device runs under its own; a layer
    slice's embeddings and head take no gradient), on exactly these example inputs."""
    reference = cpu_reference(session.model, session.inputs, dtype=session.dtype, freeze_embeddings=session.freeze,
                              **session.extra)
    reference.save(reference_path(params))
    return reference


def greedy_generate(session: Session, prompt: str, max_new_tokens: int) -> Generation:
    """Greedy decoding from `prompt`: deterministic, so the neuron runs can reproduce it token for token."""
    encoded = session.tokenizer(prompt, return_tensors="pt")
    new = greedy(session.model, dict(encoded), max_new_tokens, session.tokenizer)[0]
    return Generation(prompt, session.tokenizer.decode(new, skip_special_tokens=True), int(new.numel()))


def fill_mask(session: Session, prompt: str, top_k: int = 5) -> FillMask:
    """The model's top guesses for the `[MASK]` in `prompt` (appended when the prompt has none)."""
    tokenizer = session.tokenizer
    text = prompt if MASK in prompt else f"{prompt} {MASK}"
    text = text.replace(MASK, tokenizer.mask_token)
    encoded = tokenizer(text, return_tensors="pt")
    position = (encoded["input_ids"][0] == tokenizer.mask_token_id).nonzero()[0, 0]
    with torch.inference_mode():
        probs = session.model(**encoded).logits[0, position].float().softmax(-1)
    top = probs.topk(top_k)
    return FillMask(text, [MaskGuess(tokenizer.decode([int(i)]).strip(), round(float(p), 4))
                           for p, i in zip(top.values, top.indices)])


def next_step(result: StageResult[Any], run: RunDir | None) -> str:
    """A broken reference first; else the one-line move, held to it."""
    if result.status == "fail":
        return "**The CPU reference is broken** (NaN or infinite values): fix the model on the CPU first."
    caveat = f" Note first: {result.summary.split('. ')[0]}." if result.status == "warn" else ""
    return (f"The reference is recorded.{caveat} Open {after(result)}: the one-line move, "
            "`model.to(\"neuron\")`, held to this reference.")
