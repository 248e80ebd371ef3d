"""The environment stage's record: the device this process has, the model from its config alone, and the
run's parameters."""

from __future__ import annotations

from dataclasses import dataclass

from neuronkit.evidence import fact


@dataclass
class ModelInfo:
    """What the model is, from its config alone."""

    name: str = fact("Name")
    path: str = fact("Path")
    architecture: str = fact("Architecture")
    architecture_from: str = fact("Architecture from", doc="config.json's `architectures`, or how the class was "
                                  "chosen for a config that names none (the weights it matches)", default="")
    inputs_from: str = fact("Example inputs", doc="where the example inputs come from (tokenizer, processor or the "
                            "config alone) and what their labels train (the task's loss, or the surrogate)",
                            default="")
    model_type: str = fact("Model type")
    num_parameters: int = fact("Parameters", "count")
    dtype: str = fact("Dtype")
    estimated_bytes: int = fact("Weights", "bytes", "parameters × bytes per element in the run's dtype")


@dataclass
class DeviceInfo:
    """The `neuron` device this process has (`neuronkit.detect()`)."""

    kind: str = fact("Kind", doc="real, simulated or none", default="")
    reason: str = fact("Why", default="")
    device_count: int = fact("Logical NeuronCores", "count", default=0)
    instance_family: str | None = fact("Instance family")
    hbm_bytes_per_core: int | None = fact("HBM per logical core", "bytes")
    logical_nc_config: int | None = fact("Logical NeuronCore config (LNC)")
    versions: dict[str, str | None] = fact("Versions", factory=dict)
    env: dict[str, str] = fact("Environment variables", doc="the NEURON_* variables that shape the device",
                               factory=dict)
    device_nodes: list[str] = fact("Device nodes", factory=list)
    notes: list[str] = fact("Notes", factory=list)


@dataclass
class RunParams:
    """The parameters a run was started with, as `params.json` holds them: the model and the run
    configuration (`neuronkit.pipeline.config.RunConfig`, whose fields these are: a test holds them together)."""

    model: str = fact("Model", doc="the bundled model's name or the checkpoint directory", default="")
    dtype: str = fact("Dtype", default="")
    seq_len: int = fact("Tokens per example input", "count", default=0)
    batch_size: int = fact("Example inputs per batch", "count", default=0)
    layers: int = fact("Blocks of a layer slice", "count", "0: as many as fit the budget", default=0)
    full_model: bool = fact("Full model forced", default=False)


@dataclass
class EnvironmentEvidence:
    """Stage 00: the device this process has, the model, the run's parameters."""

    device: DeviceInfo = fact("Device", factory=DeviceInfo)
    model: ModelInfo = fact("Model", factory=ModelInfo)
    params: RunParams = fact("Notebook parameters", factory=RunParams)
    python: str = fact("Python", doc="the kernel's interpreter", default="")
