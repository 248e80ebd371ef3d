"""Stage 00, environment: which `neuron` device this process has, what the model is, and the run's
parameters. Starting this stage starts a run: it writes params.json and clears older records."""

from __future__ import annotations

import sys
from pathlib import Path

from neuronkit.evidence import DeviceInfo, EnvironmentEvidence, ModelInfo, RunParams, load
from neuronkit.stages import StageResult, recording
from neuronkit.workbook.flow import start_run
from neuronkit.workbook.params import Params


def run(params: Params) -> StageResult:
    """Detect the device and describe the model; `fail` when there is no `neuron` device to migrate to,
    `warn` when the model's weights alone exceed one logical NeuronCore's HBM."""
    import neuronkit

    start_run(params)
    with recording(params.run, "environment") as slot:
        device = neuronkit.detect()
        model = model_info(params)
        slot["evidence"] = EnvironmentEvidence(load(DeviceInfo, device.to_dict()), model,
                                               load(RunParams, params.to_dict()), sys.executable)
        fits = device.hbm_bytes_per_core is None or model.estimated_bytes <= device.hbm_bytes_per_core
        where = f"{device.kind} neuron device ({device.device_count} logical cores, {device.instance_family})"
        about = f"{model.architecture}, {model.num_parameters:,} parameters in {params.dtype}"
        if device.kind == "none":
            slot["status"], slot["summary"] = "fail", f"No neuron device: {device.reason}"
        elif not fits:
            slot["status"] = "warn"
            slot["summary"] = (f"{about} need {_gib(model.estimated_bytes)} of weights, more than the "
                               f"{_gib(device.hbm_bytes_per_core)} HBM of one logical NeuronCore; on {where}")
        else:
            slot["summary"] = f"{about}, on a {where}"
    return slot["result"]


def model_info(params: Params) -> ModelInfo:
    """What the model is, read from its config alone (no weights are loaded)."""
    from neuronkit import inputs, models

    config = models.load_config(params.model)
    architecture, source = models.architecture_of(params.model, config)
    return ModelInfo(
        name=Path(params.model).name or params.model,
        path=str(models.resolve_model(params.model)),
        architecture=architecture,
        architecture_from=source,
        inputs_from=inputs.describe(config, models.load_tokenizer(params.model), inputs.processor_config(params.model)),
        model_type=config.model_type,
        num_parameters=models.num_parameters(config),
        dtype=params.dtype,
        estimated_bytes=models.estimate_bytes(config, params.dtype),
    )


def _gib(n: int | None) -> str:
    return f"{(n or 0) / 2**30:.2f} GiB"
