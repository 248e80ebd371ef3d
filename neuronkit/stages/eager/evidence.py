"""The eager stage's records: its check steps' (one forward against the CPU reference, greedy generation,
training steps) and the stage's, which extends the forward's with the other two."""

from __future__ import annotations

from dataclasses import dataclass

from neuronkit.evidence import CheckStage, ModelSlice, Parity, fact


@dataclass
class NeffCache:
    """NEFF cache activity during the eager forward."""

    hits: int = fact("Hits", "count", default=0)
    disk_hits: int = fact("Disk hits", "count", default=0)
    misses: int = fact("Misses", "count", default=0)
    entries: int = fact("New entries", "count", default=0)
    compile_s: float = fact("Compile time", "s", "graph compilations inside the first eager forward", default=0.0)


@dataclass
class DeviceMemory:
    """Device memory after the eager forward."""

    allocated_bytes: int = fact("Allocated", "bytes", default=0)
    max_allocated_bytes: int = fact("Peak allocated", "bytes", default=0)
    hbm_bytes_per_core: int | None = fact("HBM per logical core", "bytes")


@dataclass
class EagerForward:
    """`check` stage eager: one forward of the model moved with `.to("neuron")`, against the CPU reference."""

    parity: Parity = fact("Parity against the CPU reference", factory=Parity)
    fallback_ops: list[str] = fact("CPU fallback ops", doc="ops that fell back to CPU in the forward pass",
                                   factory=list)
    autocast: str | None = fact("Autocast dtype", doc="the device ran under `torch.autocast('neuron')` in this "
                                                      "dtype (null: float32, no autocast)")
    untied_parameters: list[list[str]] = fact("Untied parameter groups", factory=list)
    executed_ops: int | None = fact("Distinct ops executed on the device", "count",
                                    "distinct op names one forward ran on the device (`torch_neuronx."
                                    "get_executed_ops()` after the forward alone: without the labels' loss, "
                                    "`.to()` copies or `generate()`), fallbacks not included")
    neff_cache: NeffCache = fact("NEFF cache", factory=NeffCache)
    memory: DeviceMemory = fact("Device memory", factory=DeviceMemory)


@dataclass
class EagerGeneration:
    """`check` stage generate: greedy generation on the CPU and on the device."""

    generate_identical: bool | None = fact("Identical tokens")
    first_divergence: int | None = fact("First differing token", "count")
    cpu_text: str | None = fact("CPU text")
    neuron_text: str | None = fact("Neuron text")
    prompt_tokens: int | None = fact("Prompt tokens", "count", "tokens before the generated ones")
    cpu_tokens: list[int] = fact("CPU tokens", factory=list)
    neuron_tokens: list[int] = fact("Neuron tokens", factory=list)
    fallback_ops: list[str] = fact("CPU fallback ops", doc="ops that fell back to CPU in `generate()`",
                                   factory=list)


@dataclass
class EagerTraining:
    """`check` stage train: SGD steps on the CPU and on the device from the same weights."""

    ok: bool = fact("Within tolerance", default=False)
    steps: int | None = fact("Steps", "count")
    optimizer: str | None = fact("Optimizer")
    max_loss_rel_err: float | None = fact("Largest loss rel error", "error")
    max_grad_norm_rel_err: float | None = fact("Largest gradient norm rel error", "error")
    rtol: float | None = fact("Rel tolerance", "error")
    cpu_losses: list[float] = fact("CPU losses", factory=list)
    neuron_losses: list[float] = fact("Neuron losses", factory=list)
    grad_norm_cpu: list[float] = fact("CPU gradient norms", factory=list)
    grad_norm_neuron: list[float] = fact("Neuron gradient norms", factory=list)
    cpu_autocast: str | None = fact("CPU autocast", doc="the dtype the CPU side ran under `torch.autocast('cpu')` "
                                    "(None: float32, no autocast), the device's own under its autocast")
    frozen: list[str] = fact("Held fixed", doc="parameters that took no gradient (a layer slice's embeddings and "
                             "head)", factory=list)
    fallback_ops: list[str] = fact("CPU fallback ops", doc="ops that fell back to CPU in the training steps",
                                   factory=list)


@dataclass
class EagerEvidence(EagerForward):
    """Stage 02: the model moved with `.to("neuron")`, against the CPU reference: the check's eager
    forward record, with its greedy generation and training records."""

    fallback_ops: list[str] = fact("CPU fallback ops", doc="ops that fell back to CPU in the forward pass, "
                                                          "`generate()` or training", factory=list)
    training: EagerTraining | None = fact("Training steps")
    generate: EagerGeneration | None = fact("Greedy generation")
    fallback_ops_by_phase: dict[str, list[str]] = fact("CPU fallback ops by phase", factory=dict)
    stages: list[CheckStage] = fact("Check stages", doc="the `neuronkit check` stages it ran (cpu: the "
                                                       "reference read back; eager, generate, train)", factory=list)
    model_slice: ModelSlice | None = fact("Ran on", doc="the full model or a layer slice of it")
