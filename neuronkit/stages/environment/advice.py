"""What notebook 00 says next, from what the environment stage found."""

from __future__ import annotations

from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.stages.environment.evidence import EnvironmentEvidence
from neuronkit.workbook.lesson import after


def next_step(result: StageResult[EnvironmentEvidence], run: RunDir | None) -> str:
    """No device: the later stages will be skipped; weights larger than a core's HBM: plan for it first."""
    assert result.evidence is not None
    device, model = result.evidence.device, result.evidence.model
    if device.kind == "none":
        return ("**No `neuron` device in this process**: the later stages will be skipped. On a Trn2/Trn3 "
                "instance check `pip show torch-neuronx` and `neuron-ls`.")
    hbm, size = device.hbm_bytes_per_core, model.estimated_bytes
    if hbm and size and size > hbm:
        return (f"**The weights alone ({size / 2**30:.1f} GiB) exceed one core's HBM ({hbm / 2**30:.0f} GiB)**: "
                "plan tensor parallelism (notebook 07) or a smaller `dtype` before the later notebooks.")
    return (f"The model fits one core. Open {after(result)}: it records what the model does on the CPU, "
            "the reference every later step is held to.")
