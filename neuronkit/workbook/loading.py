"""The model a stage works on, loaded the same way in every notebook: weights in the run's dtype on the
CPU, its tokenizer, and the deterministic example inputs every stage compares on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from neuronkit.evidence import CheckStage
from neuronkit.stages import StageResult, worst
from neuronkit.workbook.params import Params


@dataclass
class Subject:
    """A loaded model and what the stages feed it."""

    model: Any  # transformers PreTrainedModel (the checkpoint's own class), eval mode, on the CPU
    tokenizer: Any  # PreTrainedTokenizerBase or None
    config: Any  # PretrainedConfig
    inputs: dict[str, torch.Tensor]  # neuronkit.inputs.example_inputs: the task's inputs and labels
    kind: str  # the task: "causal_lm", "masked_lm", "seq2seq_lm", ... (neuronkit.models.TASKS)
    weights: Any  # neuronkit.models.Weights: where the weights came from, and what did not load


def load(params: Params) -> Subject:
    """Load the run's model, tokenizer and example inputs (`batch_size` × `seq_len` tokens for text)."""
    from neuronkit import inputs, models

    model, weights = models.load_checkpoint(params.model, dtype=params.dtype)  # its config first
    config = model.config
    tokenizer = models.load_tokenizer(params.model)
    example = inputs.example_inputs(config, tokenizer, batch_size=params.batch_size, seq_len=params.seq_len,
                                    processor=inputs.processor_config(params.model))
    return Subject(model, tokenizer, config, example, models.task_of(config), weights)


def neuron_device(device: str) -> torch.device:
    """`device` as a torch.device, refused with a clear message unless it is an existing neuron core."""
    from neuronkit.errors import NeuronkitInputError

    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise NeuronkitInputError(f"device {device!r} is not a device name ({exc})") from None
    if resolved.type != "neuron":
        raise NeuronkitInputError(f"device must be a neuron device such as 'neuron' or 'neuron:0', got {device!r}")
    count = torch.neuron.device_count()
    if resolved.index is not None and resolved.index >= count:
        raise NeuronkitInputError(f"device {device!r} does not exist: this machine has {count} logical "
                                  f"NeuronCores (neuron:0 to neuron:{count - 1})")
    return resolved


def reference_path(params: Params) -> Path:
    """Where the CPU baseline keeps the reference outputs the device stages compare with."""
    return params.run.artifact_dir("cpu_baseline") / "reference.safetensors"


def run_check(params: Params, device: str, stages: tuple[str, ...], **settings: Any) -> Any:
    """`neuronkit check`'s `stages` on the run's model, dtype and input shape, on `device` (made the
    current core, which is what the check's "neuron" means), held to the CPU baseline's reference."""
    from neuronkit.checks import Reference, check

    torch.neuron.set_device(neuron_device(device).index or 0)
    return check(params.model, stages=stages, dtype=params.dtype, batch_size=params.batch_size,
                 seq_len=params.seq_len, model_name=params.model, reference=Reference.load(reference_path(params)),
                 **settings)


def check_stages(stages: dict[str, StageResult]) -> list[CheckStage]:
    """The check stages a workbook stage ran, as its record lists them (status and summary, no evidence)."""
    return [CheckStage(s.stage, s.status, s.summary, s.duration_s, s.error) for s in stages.values()]


def check_verdict(report: Any, own: tuple[str, ...]) -> tuple[str, str]:
    """Status and summary of the check stages a workbook stage owns: the worst of them (the whole check's
    status when they were all skipped because a stage they compare against failed), and their summaries."""
    ran = [s for s in report.stages if s.stage in own]
    status = worst(s.status for s in ran)
    return (report.status if status == "skipped" else status), "; ".join(f"{s.stage}: {s.summary}" for s in ran)
