"""What notebook 02 calls: the eager stage (its check steps against the CPU baseline's saved reference, not
recomputed), and what the notebook says next."""

from __future__ import annotations

from typing import Any

from neuronkit.evidence import fields_of
from neuronkit.pipeline.check import check, check_stages
from neuronkit.pipeline.config import Params
from neuronkit.pipeline.execute import Recording, run_stage
from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.pipeline.reference import Reference
from neuronkit.pipeline.session import load, on_core, reference_path, release_copy
from neuronkit.pipeline.stage import STAGE
from neuronkit.stages.eager import EagerOptions
from neuronkit.stages.eager.evidence import EagerEvidence, EagerForward, EagerGeneration, EagerTraining
from neuronkit.workbook.lesson import after, dependents, op_list

STEPS = STAGE["eager"].steps  # the `neuronkit check` steps this stage runs


def run(params: Params, **options: Any) -> StageResult[EagerEvidence]:
    """Check eager parity on `device` (outputs, top-1 tokens, greedy generation, `train_steps` SGD steps;
    `EagerOptions`) and keep the check's evidence in the record's shape; the status is the worst of those steps."""
    return run_stage("eager", params, options, _check)


def _check(params: Params, rec: Recording[EagerEvidence]) -> None:
    try:
        session = on_core(load(params), params.config.of(EagerOptions).device)
        report = check(session.using(reference=Reference.load(reference_path(params))), STEPS, params.config)
    finally:
        release_copy(params)  # the notebook's model on the device stays; its CPU copy served this stage only
    report.record_into(rec, STEPS, evidence)


def evidence(steps: dict[str, StageResult[Any]]) -> EagerEvidence:
    """The eager stage's record: the check's eager forward record, with its generate and train records
    (each None when that check step did not run)."""
    forward = steps["eager"].evidence
    assert isinstance(forward, EagerForward)
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


def next_step(result: StageResult[EagerEvidence], run: RunDir | None) -> str:
    """A failure blocks the later stages; else the CPU fallbacks, by phase, and where to look next."""
    if result.status == "fail":
        return ("**The device disagrees with the CPU**: the report will say *blocked*, and notebooks "
                f"{dependents(result.stage)} skip. Start from the output with the largest error in the folded "
                f"record; {after(result)} lists the ops each module issues.")
    assert result.evidence is not None
    phases = {phase: ops for phase, ops in result.evidence.fallback_ops_by_phase.items() if ops}
    if not phases:
        return (f"Every op ran on the device and the answers match. Open {after(result)} to see the whole op "
                "inventory, including the backward pass and the optimizer step.")
    where = "; ".join(f"{phase}: {op_list(ops)}" for phase, ops in phases.items())
    only_generate = set(phases) == {"generate"}
    then = ("They all come from `generate()`, the decoding loop, not from the forward or training step; "
            f"open {after(result)}: it audits forward, backward and the optimizer by default, and "
            "`generate()` too with `generate=True`." if only_generate else
            f"Open {after(result)}: it names the module that issues each one, with a remedy.")
    return f"The answers match, with CPU fallbacks ({where}). {then}"
