"""Turn a stage record's evidence into labelled fields and tables for a stage card.

The layout, labels, units and column order come from the stage's record type (`neuronkit.evidence`):
fields in declaration order, a nested record as a block, a list of records as a table. A key the type
does not declare is still shown (as it is, after the declared ones), so nothing a record holds is hidden.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from neuronkit.evidence import TIME_UNITS, FieldSpec, specs
from neuronkit.pipeline.stage import STAGE
from neuronkit.pipeline.record import json_safe
from neuronkit.units import format_bytes, format_duration

_SECONDS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}

# Audit keys the report shows in sections of their own rather than inside the card.
_ELSEWHERE = {("audit", "ops"): "op coverage table", ("audit", "findings"): "blockers and findings"}
# Fields the cards leave out (the record keeps them): the profile's forward on trn2 as a sum of every op's
# roofline estimate, which no launch, host or scheduling cost enters and which reads as a forward time
# (the cost model's estimates, "What it will cost", are the ones held to published numbers).
_LEFT_OUT = {("profile", "est_trn2_step_us")}
TABLE_ROWS = 25  # rows of an evidence table shown in a card; the stage record keeps them all
_LIST_ITEMS = 20
_TEXT_CHARS = 2000
_MAX_DEPTH = 3


@dataclass
class EvidenceItem:
    """One block of a stage card: `fields` (label/value pairs) or `table` (columns and rows)."""

    label: str
    kind: str
    fields: list[tuple[str, str]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    more_rows: int = 0


def evidence_items(stage: str, evidence: Any, host: bool | None = None) -> list[EvidenceItem]:
    """The card blocks for a stage's evidence (its typed record, or the JSON dict of one): scalars in one
    block first, then blocks and tables. A field that does not apply (null) is left out of the card, and
    so is a table column null in every row; the record keeps them. Laid out by the record type's fields,
    as the JSON the record is stored as. With `host` (the run's device was simulated; None: this process's
    device) every measured time and ratio of times is labelled a host timing; estimates keep their label."""
    if host is None:
        from neuronkit.timing import clock

        host = clock() == "host"
    if is_dataclass(evidence):
        evidence = json_safe(asdict(evidence))
    loose = EvidenceItem("", "fields")
    items: list[EvidenceItem] = []
    for spec, value in _declared(STAGE[stage].evidence if stage in STAGE else None, evidence or {}):
        if (stage, spec.name) in _LEFT_OUT:
            continue
        if (stage, spec.name) in _ELSEWHERE:
            count = len(value) if isinstance(value, list) else 0
            loose.fields.append((spec.label, f"{count:,} — see the {_ELSEWHERE[stage, spec.name]} below"))
        else:
            _collect(label(spec, host), spec, value, loose, items, depth=0, host=host)
    return ([loose] if loose.fields else []) + items


def block_fields(cls: type, data: dict[str, Any]) -> list[tuple[str, str]]:
    """A record's scalar fields as label/value text, in declaration order (nested values as text)."""
    return [(spec.label, format_value(value, spec.unit)) for spec, value in _declared(cls, data)]


def label(spec: FieldSpec, host: bool) -> str:
    """A field's label; a measured time (or ratio of times) on the simulated device says it is the host's
    (a label that already names the host or the CPU says so itself)."""
    if host and spec.unit in TIME_UNITS and not spec.estimate and not {"host", "cpu"} & set(spec.label.lower().split()):
        return f"{spec.label} (host)"
    return spec.label


def _declared(cls: type | None, data: dict[str, Any]) -> list[tuple[FieldSpec, Any]]:
    """The fields `cls` declares that `data` holds, in order, then `data`'s other keys as plain fields."""
    declared = {spec.name: spec for spec in specs(cls)} if cls is not None else {}
    pairs = [(spec, data[name]) for name, spec in declared.items() if data.get(name) is not None]
    return pairs + [(FieldSpec(k, k, "", "", "", None, None), v) for k, v in data.items()
                    if k not in declared and v is not None]


def _collect(path: str, spec: FieldSpec, value: Any, loose: EvidenceItem, items: list[EvidenceItem],
             depth: int, host: bool) -> None:
    """Scalars join `loose`; a dict becomes a block of its own (typed by `spec.block` when it has one),
    a list of dicts a table (columns from `spec.row`)."""
    if isinstance(value, dict) and value and depth < _MAX_DEPTH:
        block = EvidenceItem(path, "fields")
        nested: list[EvidenceItem] = []
        for sub, sub_value in _declared(spec.block, value):
            _collect(f"{path} · {label(sub, host)}", sub, sub_value, block, nested, depth + 1, host)
        items.extend(([block] if block.fields else []) + nested)
    elif isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
        items.append(_table(path, value, spec.row, host))
    else:
        loose.fields.append((path.rsplit(" · ", 1)[-1], format_value(value, spec.unit)))


def _table(title: str, rows: list[dict[str, Any]], row_type: type | None, host: bool) -> EvidenceItem:
    """Columns in the row type's declaration order (reading order: what a row is, its verdict, its
    figures, details), labelled and formatted by their unit; undeclared columns after them."""
    declared = specs(row_type) if row_type is not None else []
    present = {k for row in rows for k, v in row.items() if v is not None}
    columns = [s for s in declared if s.name in present]
    names = {s.name for s in columns}
    for row in rows:
        columns += [FieldSpec(k, k, "", "", "", None, None) for k in row if k in present and k not in names]
        names |= set(row)
    shown = rows[:TABLE_ROWS]
    cells = [[format_value(row.get(col.name), col.unit) for col in columns] for row in shown]
    return EvidenceItem(title, "table", columns=[label(c, host) for c in columns], rows=cells,
                        more_rows=len(rows) - len(shown))


def format_value(value: Any, unit: str = "") -> str:
    """A value as text in its unit (`neuronkit.evidence.UNITS`)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return _number(value, unit)
    if isinstance(value, list):
        if unit == "shape":
            return " × ".join(str(v) for v in value) or "scalar"
        shown = [format_value(v, unit) for v in value[:_LIST_ITEMS]]
        extra = len(value) - len(shown)
        return ", ".join(shown) + (f" (+{extra:,} more)" if extra else "") if value else "none"
    if isinstance(value, dict) and all(isinstance(v, (int, float, str, type(None))) for v in value.values()):
        return ", ".join(f"{k} {format_value(v, unit)}" for k, v in value.items()) or "none"
    if isinstance(value, dict):
        return _clip(json.dumps(value, sort_keys=True, default=str))
    return _clip(str(value))


def _number(value: float, unit: str) -> str:
    if unit == "bytes":
        return format_bytes(value)
    if unit in _SECONDS:
        return format_duration(value * _SECONDS[unit])
    if unit == "%":
        return f"{value:.1f} %"
    if unit == "fraction":
        return f"{value:.1%}".replace("%", " %")
    if unit == "×":
        return f"{value:.2f}×"
    if unit == "error":
        return f"{value:.2e}"
    if unit == "count":
        return _si(value) if value >= 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.4g}"


def _si(n: float) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:,.0f}"


def _clip(text: str) -> str:
    return text if len(text) <= _TEXT_CHARS else text[:_TEXT_CHARS] + f"… ({len(text):,} characters)"
