"""Turn a stage record's evidence (free-form JSON) into labelled fields and tables for a stage card.

Keys named in docs/run-directory.md get a readable label and unit-aware values; any other key is shown
as it is, so a stage that adds evidence never needs a report change to be visible.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from neuronkit.units import format_bytes

# Known evidence keys per stage, in display order, with their labels.
LABELS: dict[str, dict[str, str]] = {
    "environment": {"device": "Device", "model": "Model", "params": "Notebook parameters"},
    "cpu_baseline": {"forward_ms": "Forward time (median)", "logits_shape": "Logits shape", "loss": "Loss",
                     "generate": "Generation", "threads": "CPU threads"},
    "eager": {"parity": "Parity against CPU", "training": "Training step", "fallback_ops": "CPU fallback ops",
              "executed_ops": "Ops executed", "neff_cache": "NEFF cache", "memory": "Device memory"},
    "audit": {"summary": "Summary", "ops": "Ops", "findings": "Findings"},
    "compile": {"graphs": "Graphs", "graph_breaks": "Graph breaks", "recompiles": "Recompiles",
                "compile_time_s": "Compile time", "eager_step_ms": "Eager step",
                "compiled_step_ms": "Compiled step", "speedup": "Speed-up", "parity": "Parity against CPU",
                "stages": "Check stages", "buckets": "Shape buckets"},
    "profile": {"top_ops": "Top ops by device time", "trace_path": "Chrome trace (open in Perfetto)",
                "parquet_path": "Parquet export", "overhead": "Profiler overhead",
                "fallbacks": "CPU fallbacks"},
}
# Audit keys the report shows in sections of their own rather than inside the card.
_ELSEWHERE = {("audit", "ops"): "op coverage table", ("audit", "findings"): "blockers and findings"}
TABLE_ROWS = 25  # rows of an evidence table shown in a card; the stage record keeps them all
# Table columns in reading order: what a row is, its verdict, its main figures, then details. Records are
# key-sorted, so without this a table reads alphabetically; columns not listed keep that order, last.
_COLUMN_ORDER = ("name", "op", "stage", "strategy", "reason", "status", "ok", "classification", "category",
                 "bound", "summary", "shape", "calls", "max_abs_err", "atol", "max_rel_err", "rtol",
                 "device_time_us", "cpu_time_us", "est_trn2_us", "buckets", "compilations", "padding_overhead",
                 "padded_tokens", "duration_s")
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


def evidence_items(stage: str, evidence: dict[str, Any]) -> list[EvidenceItem]:
    """The card blocks for a stage's evidence: known keys first in contract order, then unknown keys."""
    known = LABELS.get(stage, {})
    keys = [k for k in known if k in evidence] + [k for k in evidence if k not in known]
    loose = EvidenceItem("", "fields")  # scalar values gather in one block at the top
    items: list[EvidenceItem] = []
    for key in keys:
        label = known.get(key, key)
        value = evidence[key]
        if (stage, key) in _ELSEWHERE:
            count = len(value) if isinstance(value, list) else 0
            loose.fields.append((label, f"{count:,} — see the {_ELSEWHERE[stage, key]} below"))
        else:
            _collect(label, key, value, loose, items, depth=0)
    return ([loose] if loose.fields else []) + items


def _collect(path: str, key: str, value: Any, loose: EvidenceItem, items: list[EvidenceItem],
             depth: int) -> None:
    """Scalars join `loose` under their own key; dicts become a block of their own, lists of dicts a table."""
    if isinstance(value, dict) and value and depth < _MAX_DEPTH:
        block = EvidenceItem(path, "fields")
        nested: list[EvidenceItem] = []
        for sub_key, sub_value in value.items():
            _collect(f"{path} · {sub_key}", sub_key, sub_value, block, nested, depth + 1)
        items.extend(([block] if block.fields else []) + nested)
    elif _is_table(value):
        items.append(_table(path, value))
    else:
        loose.fields.append((path.rsplit(" · ", 1)[-1], format_value(key, value)))


def _is_table(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(row, dict) for row in value)


def _table(label: str, rows: list[dict[str, Any]]) -> EvidenceItem:
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    columns.sort(key=lambda c: _COLUMN_ORDER.index(c) if c in _COLUMN_ORDER else len(_COLUMN_ORDER))
    shown = rows[:TABLE_ROWS]
    cells = [[format_value(col, row.get(col)) for col in columns] for row in shown]
    return EvidenceItem(label, "table", columns=columns, rows=cells, more_rows=len(rows) - len(shown))


def format_value(key: str, value: Any) -> str:
    """A value as text, with the unit its key implies (`_ms`, `_s`, `_us`, `_bytes`, `_pct`, ...)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return _number(key, value)
    if isinstance(value, list):
        if key.endswith("shape") and all(isinstance(v, int) for v in value):
            return " × ".join(str(v) for v in value) or "scalar"
        shown = [format_value("", v) for v in value[:_LIST_ITEMS]]
        extra = len(value) - len(shown)
        return ", ".join(shown) + (f" (+{extra:,} more)" if extra else "") if value else "none"
    if isinstance(value, dict):
        return _clip(json.dumps(value, sort_keys=True, default=str))
    return _clip(str(value))


def _number(key: str, value: float) -> str:
    if key.endswith("_bytes") or key == "bytes_copied":
        return format_bytes(value)
    if key == "num_parameters":
        return _si(value)
    unit = next((u for suffix, u in (("_ms", "ms"), ("_us", "µs"), ("_s", "s")) if key.endswith(suffix)), "")
    if unit:
        return f"{value:,.3g} {unit}" if value < 1000 else f"{value:,.0f} {unit}"
    if "pct" in key:
        return f"{value:.1f} %"
    if key in ("speedup", "ratio"):
        return f"{value:.2f}×"
    if key.endswith("_err"):
        return f"{value:.2e}"
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
