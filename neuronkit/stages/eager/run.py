"""Stage 02, eager on neuron: the one-line move, `model.to("neuron")`, and whether the answers survive
it: `neuronkit check`'s eager, generate and training stages against the CPU baseline's reference
outputs (stage 01's, read back, not recomputed), plus what the device saw on the way (CPU fallbacks,
NEFF cache, memory)."""

from __future__ import annotations

from typing import Any

from neuronkit.evidence import EagerEvidence, EagerForward, EagerGeneration, EagerTraining, fields_of
from neuronkit.pipeline import STAGE
from neuronkit.stages import StageResult, recording
from neuronkit.workbook.flow import begin
from neuronkit.workbook.loading import check_stages, check_verdict, ran_on, release_copy, run_check
from neuronkit.workbook.params import Params, require_positive_ints

CHECK_STAGES = STAGE["eager"].steps  # the `neuronkit check` steps this stage runs


def run(params: Params, device: str = "neuron", train_steps: int = 2, generate_tokens: int = 8) -> StageResult:
    """Check eager parity on `device` (outputs, top-1 tokens, greedy generation, `train_steps` SGD steps)
    and keep the check's evidence in the contract's shape; the status is the worst of those check stages."""
    skipped = begin(params, "eager")
    if skipped:
        return skipped
    with recording(params.run, "eager") as slot:
        require_positive_ints(train_steps=train_steps, generate_tokens=generate_tokens)
        try:
            report = run_check(params, device, CHECK_STAGES, train_steps=train_steps, generate_tokens=generate_tokens)
        finally:
            release_copy(params)  # the notebook's model on the device stays; its CPU copy served this stage only
        slot["evidence"] = record = evidence({s.stage: s for s in report.stages})
        record.model_slice = report.model_slice
        slot["status"], slot["summary"] = check_verdict(report, CHECK_STAGES)
        slot["summary"] += ran_on(report.model_slice)
    return slot["result"]


def evidence(stages: dict[str, StageResult]) -> EagerEvidence:
    """The eager stage's record: the check's eager forward record, with its generate and train records
    (each None when that check stage did not run)."""
    forward: EagerForward = stages["eager"].evidence
    generate: EagerGeneration | None = _ran(stages, "generate")
    training: EagerTraining | None = _ran(stages, "train")
    phases = {name: record.fallback_ops for name, record in
              (("forward", forward), ("generate", generate), ("train", training)) if record is not None}
    record = EagerEvidence(**fields_of(forward, EagerForward), training=training, generate=generate,
                           fallback_ops_by_phase=phases,
                           stages=check_stages(stages))
    record.fallback_ops = sorted({op for ops in phases.values() for op in ops})
    record.parity.generate_identical = generate.generate_identical if generate else None
    return record


def _ran(stages: dict[str, StageResult], name: str) -> Any:
    """The typed record of check stage `name`, None when it was skipped or not asked for."""
    stage = stages.get(name)
    return stage.evidence if stage is not None and stage.status != "skipped" else None
