"""The evidence each workbook stage records: one typed record per stage, the only model of that data.

Every field carries its label and unit as metadata (`fact`), so the report, the notebooks and
`docs/run-directory.md` (generated from these types: `python -m neuronkit.evidence docs/run-directory.md`)
read them from one place instead of guessing a unit from a key's suffix. A stage builds its record,
`neuronkit.stages` stores it as JSON and reads it back as the same record (`load`, at that JSON boundary
only): readers use attributes, never keys.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any


# Units a field may carry, and how the report writes a number in it.
UNITS: dict[str, str] = {
    "": "a plain number or text",
    "ms": "milliseconds (measured: a host timing when the device is simulated)",
    "s": "seconds (measured: a host timing when the device is simulated)",
    "µs": "microseconds (measured: a host timing when the device is simulated; an estimate when its label says so)",
    "bytes": "bytes (shown in KiB/MiB/GiB)",
    "%": "percent (0-100)",
    "fraction": "a share between 0 and 1 (shown as a percent)",
    "×": "a ratio (of two host timings when the device is simulated)",
    "error": "an error or tolerance (shown in scientific notation)",
    "shape": "a tensor shape (shown as 1 × 16 × 128)",
    "count": "a count of things (thousands separated; parameters in k/M/B)",
}


# Units of a measured time (or a ratio of two): on the simulated device the host CPU's, which readers label.
TIME_UNITS = ("ms", "s", "µs", "×")


def fact(label: str, unit: str = "", doc: str = "", default: Any = None, factory: Any = None,
         estimate: bool = False) -> Any:
    """A record field with its label, unit and one-line description (what docs/run-directory.md says);
    `estimate`: a modelled Trainium figure (its label and doc name the model), not a measured time."""
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; expected one of {sorted(UNITS)}")
    metadata = {"label": label, "unit": unit, "doc": doc, "estimate": estimate}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


# ---------------------------------------------------------------------------------------------------
# Rows and blocks several stages share.


@dataclass
class ParityRow:
    """One output compared with its reference (`neuronkit.graph_compile.compare.compare_outputs`)."""

    name: str = fact("Output")
    ok: bool | None = fact("Within tolerance")
    shape: list[int] | None = fact("Shape", "shape")
    max_abs_err: float | None = fact("Max abs error", "error")
    atol: float | None = fact("Abs tolerance", "error")
    max_rel_err: float | None = fact("Max rel error", "error", "relative to the reference's largest magnitude")
    rtol: float | None = fact("Rel tolerance", "error")
    exact: bool | None = fact("Compared exactly", doc="integer outputs must be equal")
    error: str | None = fact("Problem", doc="why the output could not be compared")


@dataclass
class Parity:
    """Outputs of a device run against the CPU baseline's reference outputs."""

    reference: str = fact("Measured against", doc="the run every output is compared with", default="CPU reference")
    outputs: list[ParityRow] = fact("Outputs", factory=list)
    top1_agreement: float | None = fact("Top-1 token agreement", "fraction")
    generate_identical: bool | None = fact("Greedy generation identical")

    def largest_abs_err(self) -> float | None:
        """The largest absolute error of any output, None when no output has one (integer outputs)."""
        errors = [row.max_abs_err for row in self.outputs
                  if isinstance(getattr(row, "max_abs_err", None), (int, float))]
        return max(errors) if errors else None


@dataclass
class CheckStage:
    """One `neuronkit check` stage a workbook stage ran (its evidence is lifted into the stage's record)."""

    stage: str = fact("Check stage", default="")
    status: str = fact("Status", default="")
    summary: str = fact("Summary", default="")
    duration_s: float | None = fact("Duration", "s")
    error: str | None = fact("Error", doc="the traceback when the check stage raised, the reason when skipped")


@dataclass
class ModelSlice:
    """What a stage ran the model on: the whole checkpoint, or a layer slice of it (the embeddings, the
    first `layers` blocks of each block stack with their real weights, the final norm and the head),
    chosen to fit the memory and time budget (`neuronkit.slicing`)."""

    full_model: bool = fact("Whole model", doc="False: a layer slice ran", default=True)
    layers: int | None = fact("Blocks run", "count", "per block stack; None for a model that has no block count")
    total_layers: int | None = fact("Blocks in the model", "count", "per block stack (the largest)")
    parameters: int | None = fact("Parameters run", "count")
    total_parameters: int | None = fact("Parameters in the model", "count")
    reason: str = fact("Why", doc="forced (`--full-model`, `--layers K`), the budget, or why it cannot be sliced",
                       default="")

    def describe(self) -> str:
        """One phrase for a verdict: `the full model` or `a slice: 2 of 16 blocks (384M of 1.24B parameters)`."""
        if self.full_model:
            return "the full model"
        share = (f" ({_count(self.parameters)} of {_count(self.total_parameters)} parameters)"
                 if self.parameters and self.total_parameters else "")
        return f"a layer slice: {self.layers} of {self.total_layers} blocks{share}"


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


# ---------------------------------------------------------------------------------------------------
# One record per stage.


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
    configuration (`neuronkit.run_config`, whose fields these are: a test holds them together)."""

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
                                                        "and 04 compare with (`neuronkit.checks.Reference`)",
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
    loss_source: str = fact("Loss", doc="`model`: the model's own loss on its task's labels; else the surrogate it "
                            "trained on (`surrogate: mean square of <output>`: a base model has no loss of its own)",
                            default="")
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


@dataclass
class OpUse:
    """An op and where the model calls it."""

    op: str = fact("Op", default="")
    category: str | None = fact("Category")
    calls: int = fact("Calls", "count", default=0)
    module_paths: list[str] = fact("Module paths", factory=list)


@dataclass
class AuditOp:
    """One row of the audit's op table."""

    op: str = fact("Op", default="")
    calls: int = fact("Calls", "count", default=0)
    classification: str = fact("Classification", doc="native, cpu_fallback or blocked", default="")
    category: str = fact("Category", default="")
    dtypes: list[str] = fact("Dtypes", factory=list)
    shapes: list[Any] = fact("Shapes", factory=list)
    module_paths: list[str] = fact("Module paths", factory=list)
    nki_est_us: float | None = fact("NKI engine time (estimate)", "µs", "an NKI op's estimated engine time per call "
                                    "on trn2 from the instructions it ran (neuronkit/nki/cost.py)", estimate=True)
    nki_engine_us: dict[str, float] = fact("NKI engine time per engine (estimate)", "µs", factory=dict, estimate=True)


@dataclass
class AuditFinding:
    """What the audit found about one op, with the severity its policy gave and the remedy."""

    category: str = fact("Category", default="")
    severity: str = fact("Severity", doc="blocker, warn or info", default="")
    op: str = fact("Op", default="")
    calls: int = fact("Calls", "count", default=0)
    module_paths: list[str] = fact("Module paths", factory=list)
    message: str = fact("Message", default="")
    remedy: str = fact("Remedy", default="")


@dataclass
class AuditedModel:
    """The model as the audit traced it."""

    name: str = fact("Name", default="")
    module_class: str = fact("Class", doc="the module class traced (`class` in audit.json)", default="")
    architecture: str = fact("Architecture", default="")
    model_type: str | None = fact("Model type")
    num_parameters: int = fact("Parameters", "count", default=0)
    dtype: str = fact("Dtype", default="")
    weightless: bool = fact("Weightless", doc="traced on the meta device, no weights", default=True)
    weights: str = fact("Weights", doc="none, random or the checkpoint's", default="")
    inputs: dict[str, list[int]] = fact("Inputs", doc="input name → shape", factory=dict)
    phases: list[str] = fact("Phases traced", factory=list)
    retraced: str | None = fact("Traced on random weights", doc="where a weightless trace could not follow the "
                                "model (its code reads a tensor value, e.g. a branch on a data-dependent size), "
                                "so it was traced again on random weights")


@dataclass
class AuditSummary:
    """The audit's counts (neuronkit/op_audit/classify.py)."""

    distinct_ops: int = fact("Distinct ops", "count", default=0)
    total_calls: int = fact("Op calls", "count", default=0)
    support_pct_ops: float | None = fact("Native support (by op)", "%")
    support_pct_calls: float | None = fact("Native support (by call)", "%")
    blockers: list[OpUse] = fact("Blocker ops", factory=list)
    by_category: dict[str, int] = fact("Distinct ops per category", factory=dict)
    by_classification: dict[str, int] = fact("Distinct ops per classification", factory=dict)
    findings: dict[str, int] = fact("Findings per severity", factory=dict)
    fallbacks: list[OpUse] = fact("CPU-fallback ops", factory=list)
    nki_ops: list[str] | None = fact("Custom NKI ops")


# The audit's JSON document (docs/audit-schema.md). 2: typed records, so every key is always present (null or
# empty when it does not apply: `summary.nki_ops`, an op's `nki_est_us`); the policy's severities and remedies.
AUDIT_SCHEMA_VERSION = 2


@dataclass
class AuditEvidence:
    """Stage 03: the op audit's JSON document (schema in docs/audit-schema.md); each finding keeps the
    severity the policy gave it when the audit ran, which is what the report shows."""

    summary: AuditSummary = fact("Summary", factory=AuditSummary)
    ops: list[AuditOp] = fact("Ops", factory=list)
    findings: list[AuditFinding] = fact("Findings", factory=list)
    severities: dict[str, str] = fact("Policy severities", doc="category → severity of the op-support "
                                                              "policy the audit ran with", factory=dict)
    remedies: dict[str, str] = fact("Policy remedies", doc="category → remedy, as the audit's policy says",
                                    factory=dict)
    model: AuditedModel = fact("Audited model", factory=AuditedModel)
    versions: dict[str, str] = fact("Versions", factory=dict)
    schema_version: int = fact("Audit schema version", default=AUDIT_SCHEMA_VERSION)


@dataclass
class GraphBreak:
    """Where Dynamo split the model into more than one graph."""

    reason: str = fact("Reason", default="")
    where: str = fact("Where", default="")
    detail: str = fact("Dynamo's text", default="")


@dataclass
class CompileTraining:
    """One compiled forward and backward against the CPU reference's loss and gradient norm."""

    loss_cpu: float | None = fact("CPU loss")
    loss_compiled: float | None = fact("Compiled loss")
    grad_norm_cpu: float | None = fact("CPU gradient norm")
    grad_norm_compiled: float | None = fact("Compiled gradient norm")
    loss_rel_err: float | None = fact("Loss rel error", "error")
    grad_norm_rel_err: float | None = fact("Gradient norm rel error", "error")
    ok: bool = fact("Within tolerance", default=False)


@dataclass(frozen=True)
class Bucketing:
    """One set of bucket lengths applied to the sample prompts' lengths."""

    strategy: str = fact("Strategy", doc="`pow2` or `min_padding`", default="")
    buckets: list[int] = fact("Bucket lengths", doc="ascending; every input is padded up to the first bucket "
                                                    ">= its length", factory=list)
    compilations: int = fact("Compilations", "count", "buckets at least one input lands in", default=0)
    padding_overhead: float = fact("Padding overhead", "%", "extra tokens over the unpadded total", default=0.0)
    padded_tokens: int = fact("Padded tokens", "count", default=0)
    counts: dict[int, int] = fact("Inputs per bucket", factory=dict)


@dataclass(frozen=True)
class BucketPlan(Bucketing):
    """Shape-bucket advice (`neuronkit.graph_compile.buckets.suggest_buckets`): the recommended bucketing
    (its fields), the compilations without buckets, and the alternatives."""

    distinct_shapes: int = fact("Compilations without buckets", "count", "one per distinct length", default=0)
    max_buckets: int = fact("Bucket budget", "count", default=0)
    total_tokens: int = fact("Unpadded tokens", "count", default=0)
    lengths: list[int] = fact("Prompt lengths", factory=list)
    alternatives: list[Bucketing] = fact("Alternatives", factory=list)
    source: str = fact("Prompts measured", doc="where the lengths come from: `the bundled sample prompts` "
                       "(the same for every model) or `your <file>`", default="")

    def summary(self) -> str:
        """One sentence for a table or a log."""
        return (f"{self.source or 'prompts'}: {len(self.lengths)} inputs, {self.distinct_shapes} distinct lengths -> "
                f"{self.distinct_shapes} compilations unbucketed; buckets {self.buckets} -> "
                f"{self.compilations} compilations, {self.padding_overhead:.1f}% padding")


@dataclass
class CompiledGraph:
    """One graph the `neuron` torch.compile backend compiled: a `torch.neuron.get_dynamo_metrics()` record
    (S: neuron_dynamo_backend/metrics.py:154-177; `kind`, `neff_key`, `neff_cache_hit` are the simulator's)."""

    graph_id: str = fact("Graph id", default="")
    graph_name: str = fact("Graph", default="")
    model_name: str = fact("Model name", default="")
    has_collectives: bool = fact("Has collectives", default=False)
    graph_node_count: int = fact("FX nodes", "count", default=0)
    timestamp: str = fact("Compiled at", doc="seconds since the epoch", default="")
    torch_neuronx_fx_passes_us: int = fact("FX passes", "µs", default=0)
    torch_neuronx_lower_us: int = fact("Lowering", "µs", default=0)
    torch_neuronx_compile_us: int = fact("NEFF compile", "µs", "0 on a NEFF cache hit", default=0)
    kind: str = fact("Kind", doc="forward or backward", default="")
    neff_key: str = fact("NEFF cache key", default="")
    neff_cache_hit: bool = fact("NEFF cache hit", default=False)
    fallback_ops: list[str] = fact("CPU fallback ops", doc="always empty: a graph is lowered whole", factory=list)


@dataclass
class CompileCheck:
    """`check` stage compile: `torch.compile(model, backend="neuron", dynamic=False)`, held to the CPU reference."""

    graphs: int | None = fact("Graphs", "count")
    graph_breaks: list[GraphBreak] = fact("Graph breaks", factory=list)
    graph_break_count: int | None = fact("Graph breaks counted by Dynamo", "count")
    recompiles: int | None = fact("Recompiles for a second input shape", "count")
    recompile_shapes: list[dict[str, list[int]]] | None = fact("Shapes compiled")
    neffs: int | None = fact("NEFFs compiled", "count")
    fallback_ops: list[str] = fact("CPU fallback ops inside compiled graphs", factory=list)
    compile_time_s: float | None = fact("First compiled call (includes compilation)", "s")
    backward_compile_time_s: float | None = fact("First backward (includes compilation)", "s")
    parity: Parity = fact("Parity against the CPU reference", factory=Parity)
    training: CompileTraining | None = fact("Compiled training step")
    buckets: BucketPlan | None = fact("Shape buckets")
    graph_metrics: list[CompiledGraph] = fact("Compiled graphs", doc="one `torch.neuron.get_dynamo_metrics()` "
                                                                     "record per graph", factory=list)
    compiled_by_caller: bool = fact("Compiled by the notebook's cell", doc="the stage reused the compiled model "
                                    "the notebook made: its first call's times and its graphs", default=False)


@dataclass
class CompileTiming:
    """`check` stage timing: eager against compiled, forward and training step (host time on the simulator)."""

    eager_step_ms: float | None = fact("Eager forward on the device (median)", "ms",
                                       "the run's one forward time: every other place reads it from here")
    compiled_step_ms: float | None = fact("Compiled forward (median)", "ms")
    speedup: float | None = fact("Forward speed-up", "×", "eager over compiled forward; on the simulated device a "
                                 "ratio of host timings, and no Trainium estimate exists (nothing models a compiled "
                                 "graph's run time on Trainium)")
    eager_train_step_ms: float | None = fact("Eager training step (median)", "ms")
    compiled_train_step_ms: float | None = fact("Compiled training step (median)", "ms")
    train_speedup: float | None = fact("Training step speed-up", "×")
    runs: int | None = fact("Timed runs", "count", "interleaved, per median")


@dataclass
class CompileEvidence(CompileTiming, CompileCheck):
    """Stage 04: the check's compile and timing records: `torch.compile(model, backend="neuron", dynamic=False)`, held
    to the CPU reference, and its timings."""

    stages: list[CheckStage] = fact("Check stages", doc="the `neuronkit check` stages it ran (cpu: the "
                                                       "reference read back; compile, timing)", factory=list)
    model_slice: ModelSlice | None = fact("Ran on", doc="the full model or a layer slice of it")


@dataclass
class TopOp:
    """One op of the profile, by device time."""

    name: str = fact("Op", default="")
    calls: int = fact("Calls", "count", default=0)
    device_time_us: float = fact("Device time", "µs", default=0.0)
    cpu_time_us: float = fact("Host time", "µs", default=0.0)
    classification: str = fact("Classification", default="")
    est_trn2_us: float | None = fact("Roofline estimate on trn2", "µs", "ESTIMATE from the op's FLOPs and bytes and "
                                     "trn2's published peaks (neuronkit/data/trainium_hardware.toml)", estimate=True)
    bound: str | None = fact("Bound by")
    nki_est_us: float | None = fact("NKI engine time (estimate)", "µs", "an NKI kernel's estimated engine time on "
                                    "trn2 from the instructions it ran, beside its host time (neuronkit/nki/cost.py)",
                                    estimate=True)


@dataclass
class ProfilerOverhead:
    """Step time with and without the profiler: medians (the profiled one is the window's mean over its
    steps when the stage kept the notebook's profile)."""

    profiled_ms: float = fact("Profiled step", "ms", default=0.0)
    plain_ms: float = fact("Plain step (the overhead's baseline)", "ms", "timed beside the profiled steps to "
                           "measure the overhead; the run's forward time is the compile stage's", default=0.0)
    ratio: float = fact("Overhead", "×", default=0.0)
    reading: str = fact("Reading", doc="what the overhead means for the profile's times: `low`, or `high` (above "
                        "neuronkit.profiling.HIGH_OVERHEAD: each op's time is inflated, compare ops by share)",
                        default="")


@dataclass
class ProfiledFallback:
    """An op the profiler saw falling back to the CPU."""

    name: str = fact("Op", default="")
    calls: int = fact("Calls", "count", default=0)
    bytes_copied: int = fact("Bytes copied", "bytes", default=0)


@dataclass
class RooflineHardware:
    """The peaks the profile's roofline estimates divide by (neuronkit/data/trainium_hardware.toml)."""

    chip: str = fact("Chip", default="")
    logical_nc_config: int = fact("Logical NeuronCore config", doc="physical cores per logical core", default=0)
    bf16_flops_per_s: float = fact("bf16 peak", doc="FLOP/s of one logical core", default=0.0)
    hbm_bytes_per_s: float = fact("HBM bandwidth", doc="bytes/s of one logical core", default=0.0)
    source: str = fact("Source of the peaks", default="")
    note: str = fact("Note", default="")


@dataclass
class ProfileEvidence:
    """Stage 05: where device time goes, per op (NeuronConfig + NeuronProfiler)."""

    top_ops: list[TopOp] = fact("Top ops by device time", factory=list)
    distinct_ops: int = fact("Distinct ops", "count", default=0)
    fallbacks: list[ProfiledFallback] = fact("CPU fallbacks", factory=list)
    overhead: ProfilerOverhead = fact("Profiler overhead", factory=ProfilerOverhead)
    trace_path: str | None = fact("Chrome trace (open in Perfetto)")
    parquet_path: str | None = fact("Parquet export")
    summary_path: str | None = fact("Summary table")
    hardware: RooflineHardware = fact("Roofline hardware", factory=RooflineHardware)
    est_trn2_step_us: float | None = fact("Estimated forward on trn2 (roofline)", "µs",
                                          "ESTIMATE: every op's roofline time on one trn2 NeuronCore summed per "
                                          "step (`hardware` names the peaks' source); no launch, host or fallback "
                                          "cost", estimate=True)
    model_slice: ModelSlice | None = fact("Ran on", doc="the full model or a layer slice of it")
    profiled_by_caller: bool = fact("Profiled by the notebook's cell", doc="the stage kept the profile the "
                                    "notebook took rather than taking another", default=False)


@dataclass
class ScriptFinding:
    """One CUDA-specific use in the user's training script (`neuronkit port`)."""

    path: str = fact("File", default="")
    line: int = fact("Line", default=0)
    col: int = fact("Column", default=0)
    category: str = fact("Category", doc="rewrite (mechanical), decide (needs a person) or blocker", default="")
    rule: str = fact("Rule", doc="the row of neuronkit/data/cuda_port_rules.toml", default="")
    code: str = fact("Code", default="")
    remedy: str = fact("TorchNeuron remedy", default="")
    source: str = fact("Source of the remedy", doc="the article, the Neuron docs or S path:line", default="")
    accelerator: str | None = fact("Device-agnostic form", doc="torch.accelerator, where PyTorch has one")
    fixed_by_write: bool = fact("Fixed by the rewrite", default=False)


@dataclass
class ScriptFallback:
    """An op that fell back to the CPU while the rewritten script ran, and the script lines that issued it."""

    op: str = fact("Op", default="")
    lines: list[int] = fact("Script lines", doc="observed during the first optimizer step", factory=list)


@dataclass
class BlockerHit:
    """A blocker finding of the scan on the line the script crashed at."""

    line: int = fact("Line", default=0)
    rule: str = fact("Rule", doc="the row of neuronkit/data/cuda_port_rules.toml", default="")
    code: str = fact("Code", default="")


@dataclass
class ScriptRun:
    """The rewritten script run on the device for a few optimizer steps (`neuronkit port --run`)."""

    ok: bool = fact("Ran the asked steps", default=False)
    nproc: int = fact("Processes", "count", default=1)
    steps_asked: int = fact("Optimizer steps asked", "count", default=0)
    steps: int = fact("Optimizer steps taken", "count", default=0)
    wall_s: float = fact("Wall time", "s", default=0.0)
    returncode: int = fact("Exit status", default=0)
    error: str | None = fact("Error", doc="the script's exception, when it crashed")
    error_line: int | None = fact("Error line", doc="the script's line the error came from")
    blockers_hit: list[BlockerHit] = fact("Blockers hit", factory=list)
    fallbacks: list[ScriptFallback] = fact("CPU fallbacks", factory=list)
    peak_memory: dict[str, int] = fact("Peak memory per core", "bytes", factory=dict)
    neff_compiles: int = fact("NEFF compiles", "count", default=0)
    neff_cache_hits: int = fact("NEFF cache hits", "count", default=0)


@dataclass
class ScriptEvidence:
    """`neuronkit run MODEL --script train.py`: the user's training script, scanned, rewritten and run
    (`script.json` in the run directory; the report's "Your script" section)."""

    script: str = fact("Script", default="")
    verdict: str = fact("Verdict", doc="ready, or blocked by a blocker finding or a failed run", default="")
    counts: dict[str, int] = fact("Findings per category", "count", factory=dict)
    findings: list[ScriptFinding] = fact("Findings", factory=list)
    diff: str = fact("Rewrite diff", doc="unified diff of the rewrite fixes", default="")
    run: ScriptRun | None = fact("Run on the device")


def fields_of(record: Any, cls: type) -> dict[str, Any]:
    """The fields of `record` that record type `cls` declares (a base record's facts, to build a
    record that extends it)."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(cls)}


def rows(cls: type, items: list[dict[str, Any]]) -> list[Any]:
    """Dict rows (from a library call or a stored record) as records of `cls` (`load` each)."""
    return [load(cls, item) for item in items]


def load(cls: type, data: Any) -> Any:
    """A record of `cls` from its dict (a stored stage's evidence, a library call's row): nested records
    and rows of records typed too, a key `cls` does not declare dropped, a missing key its default. A
    value that is not a dict gives the empty record."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        return cls()
    values = {}
    for spec in specs(cls):
        if spec.name not in data:
            continue
        value = data[spec.name]
        if spec.block is not None and isinstance(value, dict):
            value = load(spec.block, value)
        elif spec.row is not None and isinstance(value, list):
            value = [load(spec.row, v) if isinstance(v, dict) else v for v in value]
        values[spec.name] = value
    return cls(**values)


@dataclass(frozen=True)
class FieldSpec:
    """A record field as readers see it: its key, label, unit, description, and the record type of its
    value (a block) or of its rows (a table), if it has one."""

    name: str
    label: str
    unit: str
    doc: str
    type_text: str
    block: type | None
    row: type | None
    estimate: bool = False


def specs(cls: type) -> list[FieldSpec]:
    """The fields of record type `cls`, in declaration order."""
    return list(_specs(cls))


@functools.cache
def _specs(cls: type) -> tuple[FieldSpec, ...]:
    hints = typing.get_type_hints(cls)  # each field's hint in its own class's module (a record may extend another's)
    result = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        block = _record_type(hint)
        row = next((_record_type(a) for a in _list_args(hint) if _record_type(a)), None)
        result.append(FieldSpec(f.name, f.metadata.get("label", f.name), f.metadata.get("unit", ""),
                                f.metadata.get("doc", ""), _type_text(hint), block, row,
                                f.metadata.get("estimate", False)))
    return tuple(result)


def _non_none(hint: Any) -> list[Any]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(hint) if a is not type(None)]
    return [hint]


def _record_type(hint: Any) -> type | None:
    return next((a for a in _non_none(hint) if dataclasses.is_dataclass(a)), None)


def _list_args(hint: Any) -> list[Any]:
    return [arg for a in _non_none(hint) if typing.get_origin(a) is list for arg in typing.get_args(a)]


def _type_text(hint: Any) -> str:
    optional = type(None) in typing.get_args(hint)
    parts = []
    for a in _non_none(hint):
        origin = typing.get_origin(a)
        if dataclasses.is_dataclass(a):
            parts.append(a.__name__)
        elif origin is list:
            parts.append(f"list of {_type_text(typing.get_args(a)[0])}")
        elif origin is dict:
            parts.append("object")
        else:
            parts.append(getattr(a, "__name__", str(a)))
    return " or ".join(parts) + (" or null" if optional else "")


# ---------------------------------------------------------------------------------------------------
# docs/run-directory.md, generated from the types above.

_HEADER = """# The run directory: what each stage writes

<!-- Generated from neuronkit/evidence.py by `python -m neuronkit.evidence docs/run-directory.md`;
a test keeps it current. Edit the types, not this file. -->

A workbook run (`neuronkit run MODEL --out DIR`, or the notebooks by hand) fills one directory:

```
DIR/
  params.json                 the parameters the run was started with (model, dtype, ...)
{records}
  artifacts/<stage>/...       bulky outputs: the CPU reference, executed notebooks, traces, Parquet, audit.json
  script.json                 your training script (`neuronkit run MODEL --script train.py`)
  artifacts/model/slice.json  what the stages that run the model run (full model or layer slice), planned once per run
  report.html, report.json    the migration report (neuronkit report DIR)
```

Every record has `stage`, `status` (`pass` | `warn` | `fail` | `error` | `skipped`), `summary` (one
sentence), `evidence` (below), `error` (traceback text when status is `error`, the reason when
`skipped`), `duration_s`, `finished_at`, `schema_version` ({version}). `fail` is a verdict on the model;
`error` means the stage's code raised, so there is no verdict. A stage that fails still writes its
record; a stage skipped because an earlier one failed writes `skipped` with the reason. A record of an
older schema version is refused with one line (run the stage again). The report reads only these
records; it never re-runs a model and never claims more than they hold. `neuronkit check` stages
(`{check}`) are the same StageResult type.

## Evidence per stage

Each stage's `evidence` is one record type of `neuronkit/evidence.py`; every field is always present
(null when it does not apply). Units: {units}.
"""

_CHECK_HEADER = """## Evidence per `neuronkit check` stage

`neuronkit check --json OUT` writes `model`, `dtype`, `status`, `ok`, `weights` and `stages`: one
StageResult per check stage, whose `evidence` is the record below (empty when the stage was skipped).
The workbook's eager record extends the eager one with the generate and train records; its compile
record is the compile and timing records together.
"""


def markdown() -> str:
    """docs/run-directory.md: the record layout and every evidence field with its label and unit."""
    from neuronkit.pipeline import CHECK_STEPS, WORKBOOK
    from neuronkit.stages import SCHEMA_VERSION

    units = "; ".join(f"`{u}` {d}" for u, d in UNITS.items() if u)
    files = [f"stages/{stage.record_file}" for stage in WORKBOOK]
    records = "\n".join(f"  {name:<28}" + ("one StageResult per stage (neuronkit/stages.py)" if not i else "")
                        for i, name in enumerate(files))
    parts = [_HEADER.format(version=SCHEMA_VERSION, check="`, `".join(step.name for step in CHECK_STEPS),
                            units=units, records="\n".join(line.rstrip() for line in records.splitlines()))]
    seen: list[type] = []
    for stage in WORKBOOK:
        parts.append(_section(f"{stage.name}: `{stage.evidence.__name__}`", stage.evidence, seen))
    parts.append(_section("script.json: `ScriptEvidence`", ScriptEvidence, seen))
    parts.append(_CHECK_HEADER)
    for step in CHECK_STEPS:
        parts.append(_section(f"check {step.name}: `{step.evidence.__name__}`", step.evidence, seen))
    parts.append("## Records inside the evidence\n")
    index = 0
    while index < len(seen):
        cls = seen[index]
        parts.append(_section(f"`{cls.__name__}`", cls, seen, level="###"))
        index += 1
    return "\n".join(parts).rstrip() + "\n"


def _section(title: str, cls: type, seen: list[type], level: str = "###") -> str:
    lines = [f"{level} {title}", "", " ".join((cls.__doc__ or "").split()), "",
             "| key | type | label | unit | notes |", "|---|---|---|---|---|"]
    for spec in specs(cls):
        for nested in (spec.block, spec.row):
            if nested is not None and nested not in seen:
                seen.append(nested)
        lines.append(f"| `{spec.name}` | {spec.type_text} | {spec.label} | {spec.unit} | {spec.doc} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from pathlib import Path

    text = markdown()
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text, encoding="utf-8")
    else:
        print(text, end="")
