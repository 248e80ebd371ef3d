"""What notebook 00 calls: the environment stage (starting a run), and what the notebook says next."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from neuronkit import models
from neuronkit.device.detect import detect
from neuronkit.evidence import load
from neuronkit.pipeline.config import Params
from neuronkit.pipeline.execute import Recording, run_stage
from neuronkit.pipeline.flow import start_run
from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.stages.environment.evidence import DeviceInfo, EnvironmentEvidence, ModelInfo, RunParams
from neuronkit.workbook.lesson import after


def run(params: Params, **options: Any) -> StageResult[EnvironmentEvidence]:
    """Detect the device and describe the model; `fail` when there is no `neuron` device to migrate to,
    `warn` when the model's weights alone exceed one logical NeuronCore's HBM."""
    start_run(params)
    return run_stage("environment", params, options, _describe)


def _describe(params: Params, rec: Recording[EnvironmentEvidence]) -> None:
    device = detect()
    model = model_info(params)
    rec.evidence = EnvironmentEvidence(load(DeviceInfo, device.to_dict()), model, load(RunParams, params.to_dict()),
                                       sys.executable)
    fits = device.hbm_bytes_per_core is None or model.estimated_bytes <= device.hbm_bytes_per_core
    where = f"{device.kind} neuron device ({device.device_count} logical cores, {device.instance_family})"
    about = f"{model.architecture}, {model.num_parameters:,} parameters in {params.config.dtype}"
    if device.kind == "none":
        rec.status, rec.summary = "fail", f"No neuron device: {device.reason}"
    elif not fits:
        rec.status = "warn"
        rec.summary = (f"{about} need {_gib(model.estimated_bytes)} of weights, more than the "
                       f"{_gib(device.hbm_bytes_per_core)} HBM of one logical NeuronCore; on {where}")
    else:
        rec.summary = f"{about}, on a {where}"


def model_info(params: Params) -> ModelInfo:
    """What the model is, read from its config alone (no weights are loaded)."""
    config = models.load_config(params.model)
    architectures = list(getattr(config, "architectures", None) or [models.model_class(config).__name__])
    return ModelInfo(
        name=Path(params.model).name or params.model,
        path=str(models.resolve_model(params.model)),
        architecture=architectures[0],
        model_type=config.model_type,
        num_parameters=models.num_parameters(config),
        dtype=params.config.dtype,
        estimated_bytes=models.estimate_bytes(config, params.config.dtype),
    )


def _gib(n: int | None) -> str:
    return f"{(n or 0) / 2**30:.2f} GiB"


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
