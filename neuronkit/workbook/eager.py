"""Stage 02, eager on neuron: the one-line move, `model.to("neuron")`, and whether the answers survive
it: `neuronkit check`'s eager, generate and training stages against the CPU baseline's reference
outputs (stage 01's, read back, not recomputed), plus what the device saw on the way (CPU fallbacks,
NEFF cache, memory)."""

from __future__ import annotations

from typing import Any

import torch

from neuronkit.evidence import CheckStage, DeviceMemory, EagerEvidence, EagerGeneration, EagerTraining, NeffCache, Parity, \
    ParityRow, rows
from neuronkit.stages import StageResult, recording
from neuronkit.workbook.flow import begin
from neuronkit.workbook.loading import check_verdict, run_check
from neuronkit.workbook.params import Params, require_positive_ints

CHECK_STAGES = ("eager", "generate", "train")


def run(params: Params, device: str = "neuron", train_steps: int = 2, generate_tokens: int = 8) -> StageResult:
    """Check eager parity on `device` (outputs, top-1 tokens, greedy generation, `train_steps` SGD steps)
    and keep the check's evidence in the contract's shape; the status is the worst of those check stages."""
    skipped = begin(params, "eager")
    if skipped:
        return skipped
    with recording(params.run, "eager") as slot:
        require_positive_ints(train_steps=train_steps, generate_tokens=generate_tokens)
        report = run_check(params, device, CHECK_STAGES, train_steps=train_steps, generate_tokens=generate_tokens)
        slot["evidence"] = evidence({s.stage: s for s in report.stages})
        slot["status"], slot["summary"] = check_verdict(report, CHECK_STAGES)
    return slot["result"]


def evidence(stages: dict[str, Any]) -> EagerEvidence:
    """The eager stage's record (neuronkit.evidence.EagerEvidence) from the check's stage records."""
    eager = stages["eager"].evidence
    generate = stages["generate"].evidence if "generate" in stages else {}
    train = stages["train"].evidence if "train" in stages else {}
    parity = eager.get("parity", {})
    phases = {name: stage.get("fallback_ops", []) for name, stage in
              (("forward", eager), ("generate", generate), ("train", train)) if stage}
    return EagerEvidence(
        parity=Parity(outputs=rows(ParityRow, parity.get("outputs", [])), top1_agreement=parity.get("top1_agreement"),
                      generate_identical=generate.get("generate_identical")),
        training=rows(EagerTraining, [train])[0] if "ok" in train else None,
        generate=EagerGeneration(generate.get("cpu_text"), generate.get("neuron_text"),
                                 generate.get("first_divergence")) if generate else None,
        fallback_ops=sorted({op for ops in phases.values() for op in ops}),
        fallback_ops_by_phase=phases,
        untied_parameters=eager.get("untied_parameters", []),
        executed_ops=eager.get("executed_ops"),
        neff_cache=NeffCache(**eager["neff_cache"]) if eager.get("neff_cache") else NeffCache(),
        memory=DeviceMemory(**eager.get("memory", {}), hbm_bytes_per_core=torch.neuron.get_device_properties(
            torch.neuron.current_device()).total_memory),
        autocast=eager.get("autocast"),
        stages=rows(CheckStage, [s.to_dict() for s in stages.values()]),
    )
