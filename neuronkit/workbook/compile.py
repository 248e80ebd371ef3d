"""Stage 04, torch.compile: the `neuron` backend's graphs, graph breaks, recompiles per input shape,
compile time and speed-up against eager (`neuronkit.compile.check`'s compile and timing stages), and
shape buckets that bound the compilations real prompt lengths would cause (`suggest_buckets`)."""

from __future__ import annotations

from typing import Any

from neuronkit.stages import StageResult, recording
from neuronkit.workbook.flow import begin
from neuronkit.workbook.loading import check_verdict, run_check
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
        require_positive_ints(timing_runs=timing_runs, max_buckets=max_buckets)
        report = run_check(params, device, CHECK_STAGES, timing_runs=timing_runs)
        slot["evidence"] = {**report.compile_evidence(), "buckets": buckets(params, prompts_file, max_buckets)}
        slot["status"], slot["summary"] = check_verdict(report, CHECK_STAGES)
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
