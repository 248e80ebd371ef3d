"""Stage 04, torch.compile: the `neuron` backend's graphs, graph breaks, recompiles per input shape,
compile time and speed-up against eager (`neuronkit.compile.check`'s compile and timing stages), and
shape buckets that bound the compilations real prompt lengths would cause (`suggest_buckets`)."""

from __future__ import annotations

from typing import Any

import torch

from neuronkit.stages import StageResult, recording
from neuronkit.workbook.flow import begin
from neuronkit.workbook.loading import neuron_device
from neuronkit.workbook.params import Params, require_positive_ints

CHECK_STAGES = ("compile", "timing")


def run(params: Params, device: str = "neuron", timing_runs: int = 5, prompts_file: str | None = None,
        max_buckets: int = 4) -> StageResult:
    """Compile the model for `device` and compare it with eager; advise buckets for the lengths of
    `prompts_file` (one prompt per line; default: the bundled sample prompts) in at most `max_buckets`."""
    skipped = begin(params, "compile")
    if skipped:
        return skipped
    with recording(params.run, "compile") as slot:
        from neuronkit.compile.check import check

        require_positive_ints(timing_runs=timing_runs, max_buckets=max_buckets)
        target = neuron_device(device)
        torch.neuron.set_device(target.index or 0)  # "neuron" in the check is the current core
        report = check(params.model, stages=CHECK_STAGES, dtype=params.dtype, timing_runs=timing_runs,
                       batch_size=params.batch_size, seq_len=params.seq_len, model_name=params.model)
        slot["evidence"] = {**report.compile_evidence(), "buckets": buckets(params, prompts_file, max_buckets)}
        ran = [s for s in report.stages if s.name in CHECK_STAGES]
        slot["status"] = max((s.status for s in ran), key=("skipped", "pass", "warn", "fail").index)
        slot["summary"] = "; ".join(f"{s.name}: {s.summary}" for s in ran)
    return slot["result"]


def buckets(params: Params, prompts_file: str | None, max_buckets: int) -> dict[str, Any] | None:
    """Shape-bucket advice for the token lengths of the prompts (None when the model has no tokenizer)."""
    from neuronkit import models
    from neuronkit.compile.buckets import sample_lengths, suggest_buckets

    tokenizer = models.load_tokenizer(params.model)
    if tokenizer is None:
        return None
    limit = getattr(models.load_config(params.model).get_text_config(), "max_position_embeddings", None)
    lengths = sample_lengths(tokenizer, prompts_file)
    lengths = [min(n, limit) for n in lengths] if limit else lengths
    return suggest_buckets(lengths, max_buckets, max_length=limit).to_dict()
