"""`neuronkit check`: staged parity checks of a model on the `neuron` device (CPU reference, eager,
greedy generation, training, torch.compile, timings): a session for the model, its steps run on it
(`neuronkit.pipeline.check`), as a workbook stage runs them on its kernel's. Imported on demand (transformers).
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from neuronkit import models
from neuronkit.pipeline.check import CheckReport, check as check_steps
from neuronkit.pipeline.config import DEFAULTS, RunConfig
from neuronkit.pipeline.record import CHECK_STAGES
from neuronkit.pipeline.reference import Reference
from neuronkit.pipeline.session import Session

__all__ = ["CHECK_STAGES", "CheckReport", "Reference", "check"]


def check(model: Any, inputs: Any = None, *, stages: Iterable[str] = CHECK_STAGES, config: RunConfig = DEFAULTS,
          tokenizer: Any = None, model_name: str | None = None, random_weights: bool = False,
          **options: Any) -> CheckReport:
    """Run the staged parity checks on a model (a module, or a MODEL spec `neuronkit.models` resolves).

    `inputs` default to `neuronkit.inputs.example_inputs` for Hugging Face models; a `.txt` file gives
    them a team's prompts (one per line, which size the compile step's buckets too), a `.safetensors` file
    its own named tensors. A MODEL spec loads the checkpoint's own weights (`random_weights`: random ones, as
    the report says), as a layer slice when too large (`neuronkit.slicing`). `stages` may name a subset; the
    steps they compare against are added. A CPU module is the reference itself (in eval mode) and the device
    runs a copy; a module on the device runs there (its mode and gradient flags given back afterwards).

    `config` is the run configuration (`neuronkit.pipeline.config.RunConfig`); `options` set its parameters
    (`dtype`: bfloat16/float16 run the device under `torch.autocast('neuron')` against the CPU under CPU
    autocast, with looser tolerances; `seq_len`, `batch_size`, `layers`, `full_model`) or its stages' options
    (`train_steps`, `lr`, `generate_tokens`, `timing_runs`, `prompts_file`, `max_buckets`) by name. For a
    session of your own (the CPU baseline's reference, a model you compiled or put on a core):
    `neuronkit.pipeline.check.check(session, steps)`."""
    session = Session.build(model, inputs, config=config.with_options(**options), tokenizer=tokenizer,
                            model_name=model_name, random_weights=random_weights)
    report = check_steps(session, stages)
    if isinstance(model, (str, os.PathLike)):
        report.architecture = models.architecture_of(model)  # the class the session loaded, and why
    return report
