"""Typed records, and the rows several of them share: how every record of the run directory is declared.

Every field carries its label and unit as metadata (`fact`), so the report, the notebooks and
`docs/run-directory.md` (generated from the record types: `python -m neuronkit.stages.docs
docs/run-directory.md`) read them from one place instead of guessing a unit from a key's suffix. Each
stage's own record types live in its folder (`neuronkit/stages/<name>/evidence.py`), the records a library
builds beside it (the audit's, the bucket plan, the script's); this module holds the rows they share
(parity, the model slice, a check step's line) and the one reader of stored records (`load`, used at the JSON
boundary only): readers use attributes, never keys.
"""

from __future__ import annotations

import dataclasses
import functools
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
        share = (f" ({_count(self.parameters)} of {_count(self.total_parameters)} parameters)"
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


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


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
