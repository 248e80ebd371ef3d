"""The audit's result: a typed record (neuronkit.evidence.AuditEvidence), its JSON document (schema in
docs/audit-schema.md, read and written only here) and its readable summary."""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path
from typing import Any

from neuronkit.evidence import AUDIT_SCHEMA_VERSION, AuditEvidence, AuditFinding, AuditOp, load
from neuronkit.json_text import json_text

SCHEMA_VERSION = AUDIT_SCHEMA_VERSION
_PATHS_SHOWN = 3
_OPS_SHOWN = 6  # per finding category in the readable summary
_CLASS_KEY = "class"  # the JSON key of AuditedModel.module_class (`class` is a keyword)


@dataclasses.dataclass
class AuditReport(AuditEvidence):
    """What a model will do on Trainium, op by op: the audit stage's evidence record with its JSON form and
    its readable summary (see docs/audit-schema.md for every key)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON document as a dict."""
        data = dataclasses.asdict(self)
        data["model"] = {(_CLASS_KEY if k == "module_class" else k): v for k, v in data["model"].items()}
        return data

    def to_json(self, path: str | Path | None = None) -> str:
        """The JSON document; also written to `path` when given."""
        return json_text(self.to_dict(), path)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditReport:
        """The report from its JSON document (the one `load` at the audit's JSON boundary)."""
        model = {("module_class" if k == _CLASS_KEY else k): v for k, v in (data.get("model") or {}).items()}
        return load(cls, {**data, "model": model})

    def evidence(self) -> AuditEvidence:
        """The record the workbook's audit stage stores."""
        return AuditEvidence(**{f.name: getattr(self, f.name) for f in dataclasses.fields(AuditEvidence)})

    def findings_in(self, *categories: str) -> list[AuditFinding]:
        """Findings of the given categories (all findings when none are given)."""
        return [f for f in self.findings if not categories or f.category in categories]

    def op(self, name: str) -> AuditOp | None:
        """The row of one op, by its `aten::name`."""
        return next((row for row in self.ops if row.op == name), None)

    def table(self) -> str:
        """A readable summary: ops per category, then every finding with where it comes from and its remedy."""
        s, m = self.summary, self.model
        mode = {"none": "weightless", "random": "random weights"}.get(m.weights, "its own weights")
        lines = [
            f"{m.name} ({m.architecture}, {m.dtype}, {mode}; {'+'.join(m.phases)})",
            f"{s.total_calls} calls of {s.distinct_ops} distinct ops; native on Neuron: "
            f"{_pct(s.support_pct_ops)} of ops, {_pct(s.support_pct_calls)} of calls",
            *([f"traced on random weights: {m.retraced}"] if m.retraced else []),
            "",
            f"  {'category':<28}{'ops':>5}{'calls':>9}",
        ]
        for category, count in s.by_category.items():
            calls = sum(r.calls for r in self.ops if r.category == category)
            lines.append(f"  {category:<28}{count:>5}{calls:>9}")
        counts = ", ".join(f"{n} {sev}" for sev, n in s.findings.items())
        lines += ["", f"findings: {counts}" if self.findings else "findings: none"]
        groups: dict[str, list[AuditFinding]] = {}
        for f in self.findings:
            groups.setdefault(f.category, []).append(f)
        for category, group in groups.items():
            lines.append(f"  {group[0].severity.upper():<8} {category}")
            for f in group[:_OPS_SHOWN]:
                lines.append(f"    {f.op:<48} x{f.calls:<6} in {_paths(f.module_paths)}")
            if len(group) > _OPS_SHOWN:
                lines.append(f"    (+{len(group) - _OPS_SHOWN} more ops)")
            lines.append(f"    remedy: {group[0].remedy}")
        return "\n".join(lines)

    def compat_table(self) -> str:
        """The model's public PyTorch calls in AWS's compatibility-table vocabulary, most severe first."""
        m = self.model
        lines = [f"{m.name}: {len(self.apis)} public PyTorch APIs called ({'+'.join(m.phases)}), as AWS's "
                 "compatibility table classifies them", ""]
        width = max((len(_api_name(a.namespace, a.api)) for a in self.apis), default=0)
        for a in self.apis:
            dtypes = f" [{', '.join(a.dtypes)}]" if a.dtypes else ""
            lines.append(f"  {_api_name(a.namespace, a.api):<{width}}  {a.status:<12} x{a.calls:<6} {a.how}{dtypes}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The readable summary in a notebook cell (escaped)."""
        return f"<pre>{html.escape(self.table())}</pre>"


def _api_name(namespace: str, api: str) -> str:
    return f"{namespace}.{api}" if namespace else f"(outside a public call) {api}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def _paths(paths: list[str]) -> str:
    """Module paths with layer indices folded (`model.layers.*.mlp`), the first few shown."""
    folded = list(dict.fromkeys(re.sub(r"\.\d+(?=\.|$)", ".*", p) for p in paths))
    shown = ", ".join(folded[:_PATHS_SHOWN])
    return shown + (f" (+{len(folded) - _PATHS_SHOWN} more)" if len(folded) > _PATHS_SHOWN else "")
