"""Typed records, and the rows several of them share: how every record of the run directory is declared.

Every field carries its label and unit as metadata (`fact`), so the report, the notebooks and
`docs/run-directory.md` (generated from the record types: tests/pipeline/run_directory_doc.py) read them
from one place instead of guessing a unit from a key's suffix. Each
stage's own record types live in its folder (`neuronkit/stages/<name>/evidence.py`); this module holds the
rows several share (parity, the model slice, a check step's line), the records a library builds for a stage
and the report to read (the audit's document, the bucket plan, the script's), and the one reader of stored
records (`load`, used at the JSON boundary only): readers use attributes, never keys.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from neuronkit.units import format_count

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
# Rows and blocks several records share.


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
        share = (f" ({format_count(self.parameters)} of {format_count(self.total_parameters)} parameters)"
                 if self.parameters and self.total_parameters else "")
        return f"a layer slice: {self.layers} of {self.total_layers} blocks{share}"


# The bucket advice `neuronkit.graph_compile.buckets` builds (whose package registers the torch.compile backend
# when imported: its record stays here, where the compile stage's reads it without that import).


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


# Records the libraries build, which a stage, the report and the library itself read: the op audit's document
# (the audit stage's record) and `neuronkit run --script`'s script.json.


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


@dataclass
class AuditApi:
    """One public PyTorch API the model called, in the public compatibility table's vocabulary
    (neuronkit/compat/vocabulary.py); `namespace` is empty for a scope of non-public calls (`<optimizer>`)."""

    namespace: str = fact("Namespace", doc="torch, torch.Tensor, torch.nn.functional, ...", default="")
    api: str = fact("API", default="")
    calls: int = fact("Calls", "count", default=0)
    status: str = fact("Supported", doc="Y, CPU_FALLBACK, N, or unknown (the policy cannot settle it)", default="")
    how: str = fact("Limitations", doc="Native, Host-only or Needs a process group; the ATen ops that fall back "
                                      "or block, with why; why unknown", default="")
    aten_ops: list[str] = fact("ATen ops", doc="the ops that decide the status", factory=list)
    dtypes: list[str] = fact("Dtypes affected", doc="of a CPU fallback: the dtypes its calls ran on", factory=list)


# The audit's JSON document (docs/audit-schema.md). 2: typed records, so every key is always present (null or
# empty when it does not apply: `summary.nki_ops`, an op's `nki_est_us`); the policy's severities and remedies.
# 3: `apis`, the model's public PyTorch calls in AWS's compatibility-table vocabulary.
AUDIT_SCHEMA_VERSION = 3


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
    apis: list[AuditApi] = fact("Public APIs", doc="each public PyTorch API the model called, classified as "
                                "AWS's compatibility table does", factory=list)
    schema_version: int = fact("Audit schema version", default=AUDIT_SCHEMA_VERSION)


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
class ScriptModelBlocker:
    """What the op audit of the model the script trains found the device cannot run."""

    op: str = fact("Op", default="")
    category: str = fact("Category", doc="the op-support policy's rule", default="")
    remedy: str = fact("Remedy", default="")


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
    model_blockers: list[ScriptModelBlocker] = fact("Model blockers", doc="the op audit of the model the script "
                                                    "trains", factory=list)
    losses: list[float] = fact("Loss per step", doc="averaged over the processes", factory=list)
    warnings: list[str] = fact("Warnings", doc="a GradScaler that disabled itself, no op on the device", factory=list)
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
