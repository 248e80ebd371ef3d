"""The nbval contract: the deterministic lines each notebook's last cell prints for
`# NBVAL_CHECK_OUTPUT` (tests/nbval/expected_outputs.json records them).

Only facts that depend on the model and the parameters, never on timings, paths or the machine.
"""

from __future__ import annotations

from typing import Any

from neuronkit.stages import StageResult

# Evidence paths printed per stage. Rows of a table keep STABLE_KEYS.
CHECKED: dict[str, tuple[str, ...]] = {
    "environment": ("device.kind", "model.name", "model.architecture", "model.model_type",
                    "model.num_parameters", "model.dtype"),
    "cpu_baseline": ("logits_shape", "loss", "generate.text", "fill_mask.text"),
    "eager": ("parity.outputs", "parity.top1_agreement", "parity.generate_identical", "training.ok",
              "fallback_ops"),
    "audit": ("summary.distinct_ops", "summary.support_pct_ops", "summary.by_category", "summary.blockers"),
    "compile": ("graphs", "graph_breaks", "recompiles", "parity.outputs", "buckets.buckets",
                "buckets.compilations"),
    "profile": ("distinct_ops", "fallbacks"),
}
STABLE_KEYS = ("name", "op", "category", "calls", "shape", "ok", "reason", "bytes_copied")
_MISSING = object()


def summary(result: StageResult) -> str:
    """The deterministic lines the `# NBVAL_CHECK_OUTPUT` cell prints: status and the checked facts."""
    lines = [f"{result.stage}: {result.status}"]
    if result.status == "skipped":
        lines.append(f"  reason: {result.error}")
    for path in CHECKED[result.stage]:
        value = _lookup(result.evidence, path)
        if value is not _MISSING:
            lines.append(f"  {path}: {_stable(value)}")
    return "\n".join(lines)


def _lookup(data: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(data, dict) or key not in data:
            return _MISSING
        data = data[key]
    return data


def _stable(value: Any) -> str:
    """A value printed so that float noise below three significant digits does not show."""
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, list):
        rows = [{k: v[k] for k in STABLE_KEYS if k in v} if isinstance(v, dict) else v for v in value]
        return "[" + ", ".join(_stable(v) for v in rows) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_stable(v)}" for k, v in value.items()) + "}"
    return repr(value) if isinstance(value, str) else str(value)
