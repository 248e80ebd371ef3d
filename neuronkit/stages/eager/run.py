"""Stage 02, eager on neuron: the one-line move, `model.to("neuron")`, and whether the answers survive
it: `neuronkit check`'s eager, generate and train steps against the CPU baseline's reference
outputs (stage 01's, read back, not recomputed), plus what the device saw on the way (CPU fallbacks,
NEFF cache, memory)."""

from __future__ import annotations

from typing import Any

from neuronkit.evidence import fields_of
from neuronkit.pipeline.check import check, check_stages
from neuronkit.pipeline.config import Params
from neuronkit.pipeline.execute import Recording, run_stage
from neuronkit.pipeline.record import StageResult
from neuronkit.pipeline.reference import Reference
from neuronkit.pipeline.session import load, on_core, ran_on, reference_path, release_copy
from neuronkit.pipeline.stage import STAGE
from neuronkit.stages.eager import Options
from neuronkit.stages.eager.evidence import EagerEvidence, EagerForward, EagerGeneration, EagerTraining

STEPS = STAGE["eager"].steps  # the `neuronkit check` steps this stage runs


def run(params: Params, **options: Any) -> StageResult[EagerEvidence]:
    """Check eager parity on `device` (outputs, top-1 tokens, greedy generation, `train_steps` SGD steps;
    `Options`) and keep the check's evidence in the record's shape; the status is the worst of those steps."""
    return run_stage("eager", params, options, _check)


def _check(params: Params, rec: Recording[EagerEvidence]) -> None:
    try:
        session = on_core(load(params), params.config.of(Options).device)
        report = check(session.using(reference=Reference.load(reference_path(params))), STEPS, params.config)
    finally:
        release_copy(params)  # the notebook's model on the device stays; its CPU copy served this stage only
    rec.evidence = record = evidence({s.stage: s for s in report.stages})
    record.model_slice = report.model_slice
    rec.status, rec.summary = report.verdict(STEPS)
    rec.summary += ran_on(report.model_slice)


def evidence(steps: dict[str, StageResult[Any]]) -> EagerEvidence:
    """The eager stage's record: the check's eager forward record, with its generate and train records
    (each None when that check step did not run)."""
    forward: EagerForward = steps["eager"].evidence
    generate: EagerGeneration | None = _ran(steps, "generate")
    training: EagerTraining | None = _ran(steps, "train")
    phases = {name: record.fallback_ops for name, record in
              (("forward", forward), ("generate", generate), ("train", training)) if record is not None}
    record = EagerEvidence(**fields_of(forward, EagerForward), training=training, generate=generate,
                           fallback_ops_by_phase=phases, stages=check_stages(steps))
    record.fallback_ops = sorted({op for ops in phases.values() for op in ops})
    record.parity.generate_identical = generate.generate_identical if generate else None
    return record


def _ran(steps: dict[str, StageResult[Any]], name: str) -> Any:
    """The typed record of check step `name`, None when it was skipped or not asked for."""
    step = steps.get(name)
    return step.evidence if step is not None and step.status != "skipped" else None
