"""The report's "What it will cost" section: the cost record (notebook 07's, with the team's budget and
targets) or, without one, the run's model summarized with the defaults (`neuronkit.cost.record`).

Kept in its own module beside the section's template (cost.html.j2) so it moves as one piece.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuronkit.cost import record as cost_record
from neuronkit.cost.text import count, hours, usd
from neuronkit.errors import NeuronkitInputError
from neuronkit.units import format_duration


def cost_section(run_dir: str | Path, params: dict[str, Any]) -> dict[str, Any]:
    """The section's data: `record` (neuronkit.cost.record's), `source` (who set the budget and targets),
    and the rows as text; or `unavailable`, one line saying why there is no estimate."""
    record, source = cost_record.read(run_dir), "notebook 07, with its budget and targets"
    if record is None:
        model = params.get("model")
        if not model:
            return {"unavailable": "no model in the run's parameters to estimate"}
        try:
            record = cost_record.summarize(str(model))
        except NeuronkitInputError as exc:
            return {"unavailable": str(exc)}
        except Exception as exc:  # noqa: BLE001 - an estimate the model breaks must not take the report with it
            return {"unavailable": f"the cost model failed on {model} ({type(exc).__name__}: "
                                   f"{' '.join(str(exc).split())[:200]}), a neuronkit bug to report"}
        source = "the run's model with the default budget and targets (notebook 07 sets your own)"
    return {"record": record, "source": source, "training": [_training_row(r) for r in record["training"]],
            "serving": [_serving_row(r) for r in record["serving"]], "tiles": _tiles(record)}


def _training_row(row: dict[str, Any]) -> dict[str, str]:
    budget = row["budget"]
    return {"where": f"{row['nodes']} × {row['instance']}", "layout": row["layout_text"],
            "rate": f"{count(row['tokens_per_s'])} tokens/s", "mfu": f"{row['mfu']:.0%}",
            "hourly": usd(row["usd_per_hour"]), "per_million": usd(row["usd_per_million_tokens"]),
            "time": hours(budget["hours"]), "total": usd(budget["usd"]), "price": row["price_source"]}


def _serving_row(row: dict[str, Any]) -> dict[str, str]:
    copies = f" × {row['replicas']}" if row["replicas"] > 1 else ""
    return {"where": row["instance"], "layout": f"tp={row['tp']}{copies}, batch {row['batch']}",
            "rate": f"{count(row['output_tokens_per_s'])} tokens/s", "ttft": format_duration(row["ttft_s"]),
            "tpot": format_duration(row["tpot_s"]), "hourly": usd(row["usd_per_hour"]),
            "per_million": usd(row["usd_per_million_tokens"]), "price": row["price_source"]}


def _tiles(record: dict[str, Any]) -> list[dict[str, str]]:
    """The section's two headline figures: training the budget, and serving per million tokens."""
    tiles = []
    band = record["band"]
    if record["training"]:
        best = record["training"][0]
        tokens = count(best["budget"]["tokens"])
        value = usd(best["budget"]["usd"]) if best["budget"]["usd"] is not None else hours(best["budget"]["hours"])
        tiles.append({"label": f"Training {tokens} tokens (estimate)", "value": value,
                      "note": f"{hours(best['budget']['hours'])} on {best['nodes']} × {best['instance']} "
                              f"({best['layout_text']}), ±{band['training']:.0%}"})
    if record["serving"]:
        best = record["serving"][0]
        value = (f"{usd(best['usd_per_million_tokens'])}/M tokens" if best["usd_per_million_tokens"] is not None
                 else f"{count(best['output_tokens_per_s'])} tokens/s")
        tiles.append({"label": "Serving (estimate)", "value": value,
                      "note": f"output tokens on {best['instance']}, tp={best['tp']}, batch {best['batch']}, "
                              f"TPOT ≤ {record['assumptions']['max_tpot_ms']:g} ms, ±{band['serving']:.0%}"})
    return tiles
