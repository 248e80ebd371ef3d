"""The CPU baseline's records: the stage's (timing, loss, a greedy generation or a masked-word fill, where the
weights came from) and its `cpu` check step's (the CPU reference every device step is compared with)."""

from __future__ import annotations

from dataclasses import dataclass

from neuronkit.evidence import ModelSlice, fact


@dataclass
class CpuRun:
    """The CPU run's timing, loss and gradient norm: what the device stages are held to."""

    forward_ms: float | None = fact("CPU forward (median)", "ms", "the CPU model's forward: the reference's time, "
                                    "not the device's (that one is the compile stage's eager forward)")
    loss: float | None = fact("Loss")
    grad_norm: float | None = fact("Gradient norm", doc="of one backward from the loss: what compiled training "
                                                       "is held to")
    threads: int | None = fact("CPU threads", "count")


@dataclass
class Generation:
    """Greedy decoding on the CPU: deterministic, so the device runs can reproduce it token for token."""

    prompt: str = fact("Prompt", default="")
    text: str = fact("Text", default="")
    new_tokens: int = fact("New tokens", "count", default=0)


@dataclass
class MaskGuess:
    """One guess for the masked word."""

    token: str = fact("Token", default="")
    score: float = fact("Probability", "fraction", default=0.0)


@dataclass
class FillMask:
    """A masked LM's top guesses for the `[MASK]` in a prompt."""

    text: str = fact("Prompt", default="")
    predictions: list[MaskGuess] = fact("Guesses", factory=list)


@dataclass
class WeightsInfo:
    """Where the model's weights came from, and what the checkpoint and the model class disagree on."""

    source: str = fact("Source", doc="the checkpoint, or random", default="")
    missing: list[str] = fact("Missing from the checkpoint", factory=list)
    unexpected: list[str] = fact("Unused from the checkpoint", factory=list)
    warnings: list[str] = fact("Warnings", doc="any makes the stage `warn`", factory=list)


@dataclass
class CpuBaselineEvidence(CpuRun):
    """Stage 01: the CPU run every later stage is held to."""

    logits_shape: list[int] = fact("Logits shape", "shape", factory=list)
    reference_path: str = fact("Reference outputs", doc="safetensors file of the inputs and outputs stages 02 "
                                                        "and 04 compare with (`neuronkit.pipeline.reference.Reference`)",
                               default="")
    generate: Generation | None = fact("Generation", doc="greedy decoding from a prompt (causal LMs)")
    fill_mask: FillMask | None = fact("Masked-word fill", doc="the top guesses for a `[MASK]` (masked LMs)")
    weights: WeightsInfo = fact("Weights", factory=WeightsInfo)
    model_slice: ModelSlice | None = fact("Ran on", doc="the full model or a layer slice of it")


@dataclass
class ReferenceOutput:
    """One named output of the CPU reference."""

    name: str = fact("Output", default="")
    shape: list[int] = fact("Shape", "shape", factory=list)
    dtype: str = fact("Dtype", default="")


@dataclass
class CpuCheck(CpuRun):
    """`check` stage cpu: the CPU reference every device stage is compared with (run here, or read back
    from the CPU baseline's file)."""

    outputs: list[ReferenceOutput] = fact("Reference outputs", factory=list)
    reused: bool = fact("Read from the CPU baseline", default=False)
    parameters: int | None = fact("Parameters", "count")
