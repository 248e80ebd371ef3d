"""The op audit's typed document (docs/audit-schema.md): its ops, findings and summary; the audit stage's
record is this document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuronkit.evidence import fact


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
