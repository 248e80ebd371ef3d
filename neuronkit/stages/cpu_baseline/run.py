"""Stage 01, CPU baseline: the model's behaviour on the CPU, the reference every later stage is held to
(forward time, loss, and a greedy generation or a masked-word fill a person can read). It saves the
reference outputs (`neuronkit.checks.Reference`) that the eager (02) and compile (04) stages read."""

from __future__ import annotations

import math
from typing import Any

import torch

from neuronkit import slicing
from neuronkit.calling import call, greedy
from neuronkit.evidence import CpuBaselineEvidence, FillMask, Generation, MaskGuess, WeightsInfo
from neuronkit.evidence import load as load_record
from neuronkit.timing import interleaved_medians
from neuronkit.stages import StageResult, recording
from neuronkit.units import format_ms
from neuronkit.workbook.flow import begin
from neuronkit.workbook.loading import Subject, load, ran_on, reference_path
from neuronkit.workbook.params import Params, require_positive_ints

MASK = "[MASK]"  # where a masked-LM prompt has its gap; replaced by the tokenizer's own mask token


def run(params: Params, prompt: str = "A migration starts with", max_new_tokens: int = 16,
        timing_steps: int = 5) -> StageResult:
    """Time the forward pass on the CPU (median of `timing_steps` after a warm-up), record its loss, and
    sample the model on `prompt`.

    `fail` when the CPU logits are not finite: a model broken on the CPU cannot be migrated yet."""
    skipped = begin(params, "cpu_baseline")
    if skipped:
        return skipped
    with recording(params.run, "cpu_baseline") as slot:
        require_positive_ints(max_new_tokens=max_new_tokens, timing_steps=timing_steps)
        subject = load(params)
        timing_steps = slicing.repeats(subject.model_slice, "cpu_timing_steps", timing_steps)
        with torch.inference_mode():
            out = call(subject.model, subject.inputs)
            forward_ms = interleaved_medians({"cpu": lambda: call(subject.model, subject.inputs)},
                                             runs=timing_steps)["cpu"]
        loss = float(out.loss) if getattr(out, "loss", None) is not None else None
        logits = out.logits if getattr(out, "logits", None) is not None else out[0]  # base models: hidden states
        reference = save_reference(params, subject)
        evidence = CpuBaselineEvidence(forward_ms=forward_ms, logits_shape=list(logits.shape), loss=loss,
                                       grad_norm=reference.grad_norm, threads=torch.get_num_threads(),
                                       reference_path=str(reference_path(params)),
                                       weights=load_record(WeightsInfo, subject.weights.to_dict()),
                                       model_slice=subject.model_slice)
        if subject.tokenizer is not None and subject.kind == "causal_lm":
            evidence.generate = greedy_generate(subject, prompt, max_new_tokens)
        elif subject.tokenizer is not None and subject.kind == "masked_lm":
            evidence.fill_mask = fill_mask(subject, prompt)
        slot["evidence"] = evidence
        if not torch.isfinite(logits).all() or (loss is not None and not math.isfinite(loss)):
            slot["status"], slot["summary"] = "fail", "The CPU forward pass produced NaN or infinite values."
        else:
            slot["summary"] = (f"CPU forward {format_ms(forward_ms)} (median of {timing_steps}) on "
                               f"{evidence.threads} CPU threads" + (f", loss {loss:.4f}" if loss is not None else "")
                               + ran_on(subject.model_slice))
            if subject.weights.warnings():  # a head dropped or left random: never a silent pass
                slot["status"] = "warn"
                slot["summary"] = "; ".join(subject.weights.warnings()) + ". " + slot["summary"]
    return slot["result"]


def save_reference(params: Params, subject: Subject) -> Any:
    """Compute and save the CPU reference the device stages compare with (the check's own: the run's
    model, under CPU autocast of a bfloat16/float16 run's dtype as the device runs under its own; a layer
    slice's embeddings and head take no gradient), on exactly these example inputs."""
    from neuronkit.checks.parity import cpu_reference, forward_extras
    from neuronkit.models import as_dtype

    model = subject.model
    reference = cpu_reference(model, subject.inputs, dtype=as_dtype(params.dtype),
                              freeze_embeddings=not subject.model_slice.full_model, **forward_extras(model))
    reference.save(reference_path(params))
    return reference


def greedy_generate(subject: Subject, prompt: str, max_new_tokens: int) -> Generation:
    """Greedy decoding from `prompt`: deterministic, so the neuron runs can reproduce it token for token."""
    encoded = subject.tokenizer(prompt, return_tensors="pt")
    new = greedy(subject.model, dict(encoded), max_new_tokens, subject.tokenizer)[0]
    return Generation(prompt, subject.tokenizer.decode(new, skip_special_tokens=True), int(new.numel()))


def fill_mask(subject: Subject, prompt: str, top_k: int = 5) -> FillMask:
    """The model's top guesses for the `[MASK]` in `prompt` (appended when the prompt has none)."""
    text = prompt if MASK in prompt else f"{prompt} {MASK}"
    text = text.replace(MASK, subject.tokenizer.mask_token)
    encoded = subject.tokenizer(text, return_tensors="pt")
    position = (encoded["input_ids"][0] == subject.tokenizer.mask_token_id).nonzero()[0, 0]
    with torch.inference_mode():
        probs = subject.model(**encoded).logits[0, position].float().softmax(-1)
    top = probs.topk(top_k)
    return FillMask(text, [MaskGuess(subject.tokenizer.decode([int(i)]).strip(), round(float(p), 4))
                           for p, i in zip(top.values, top.indices)])
