"""`neuronkit check`: staged parity checks of a model on the `neuron` device (CPU reference, eager,
greedy generation, training, torch.compile, timings), each step a `neuronkit.pipeline.record.StageResult`.

`neuronkit.check(model, inputs, ...)` builds a session for a model (`neuronkit.pipeline.session.Session`)
and runs the steps on it (`neuronkit.pipeline.check.check(session, steps)`), as a workbook stage does on its
kernel's session. Imported on demand (it loads transformers).
"""

from __future__ import annotations

from typing import Any, Iterable

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
    its own named tensors. A MODEL spec loads the checkpoint's own weights; `random_weights=True` builds it
    from its config instead (the report says so). `stages` may name a subset; the steps they compare against
    are added. A CPU module serves as the reference itself (in eval mode); the device runs a copy. A module
    passed on the device runs there itself (its mode and gradient flags given back afterwards) and is copied
    to the CPU only if a step computes on the CPU. The eager step clears torch_neuronx's op tracking, and the
    compile step calls `torch._dynamo.reset()` first, so their op lists, graph and recompile counts are this
    model's alone.

    `config` is the run configuration (`neuronkit.pipeline.config.RunConfig`); `options` set its parameters
    or its stages' options by name on top of it: `dtype` float32 compares fp32 numerics tightly;
    bfloat16/float16 run the device under `torch.autocast('neuron')` against the CPU under
    `torch.autocast('cpu')` of the same dtype (like with like: the tolerance bounds what the device adds, not
    what the dtype costs), with looser tolerances, a MODEL spec loaded in that dtype; `seq_len`, `batch_size`
    shape the example inputs; a MODEL spec too large for the budget runs as a layer slice (its first `layers`
    blocks; 0: as many as fit, `neuronkit.slicing`) unless `full_model`, and its embeddings and head are then
    held fixed in every backward. Each stage's own (`train_steps`, `lr`, `generate_tokens`, `timing_runs`,
    `prompts_file`, `max_buckets`, ...) are fields of its folder's `Options` (`neuronkit/stages/<name>/`).
    For a session of your own (the CPU baseline's reference, a model you compiled, a model already on a
    core) use `neuronkit.pipeline.check.check(session, steps)`."""
    session = Session.build(model, inputs, config=config.with_options(**options), tokenizer=tokenizer,
                            model_name=model_name, random_weights=random_weights)
    return check_steps(session, stages)
