"""The cost record: the report's "What it will cost" section, a manager's answer in one file.

`summarize(MODEL)` sweeps the catalogue for the cheapest training layout that fits (hours and dollars for a
token budget, default Chinchilla's 20 per parameter) and the cheapest serving setup at a latency target,
every figure an ESTIMATE with its band and the published rows it was checked on. Notebook 07 writes it
with the team's own budget and targets (`run_dir/cost.json`, beside the stage records like
distributed.json); without one, the report summarizes the run's model with the defaults. A malformed
file is ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuronkit.pipeline.record import RunDir

RECORD = "cost.json"
SCHEMA = 1


def summarize(spec: Any, *, tokens: float | None = None, seq_len: int = 2048, global_batch: int = 1024,
              input_len: int = 1024, output_len: int = 256, max_tpot_ms: float = 50.0,
              max_ttft_ms: float = 2000.0, max_days: float | None = None) -> dict[str, Any]:
    """The cheapest training layout and serving setup for the model `spec` names, as the report shows them."""
    from neuronkit.cost import sweep
    from neuronkit.cost.constants import frozen
    from neuronkit.cost.shape import model_shape

    shape = model_shape(spec)
    limit, asked = shape.max_positions, (seq_len, input_len, output_len)
    if limit is not None:  # the report's defaults assume 2,048-token sequences: a shorter model gets its own
        seq_len = min(seq_len, limit)
        if input_len + output_len > limit:
            output_len = max(1, min(output_len, limit // 5))
            input_len = limit - output_len
    constants = frozen()
    choice = sweep.Choice(max_hours=max_days * 24 if max_days else None)
    trained = sweep.train(shape, global_batch=global_batch, seq_len=seq_len, tokens=tokens, choice=choice)
    served = (sweep.serve(shape, input_len=input_len, output_len=output_len, max_tpot_s=max_tpot_ms / 1e3,
                          max_ttft_s=max_ttft_ms / 1e3, choice=choice) if shape.causal else [])
    notes = sorted({note for est in trained[:1] + served[:1] for note in est.notes})
    if (seq_len, input_len, output_len) != asked:
        notes.append(f"sequence lengths cut to the model's max_position_embeddings {limit}: training {seq_len} "
                     f"tokens, serving {input_len} in / {output_len} out")
    return {
        "schema": SCHEMA, "model": shape.name, "parameters": shape.parameters,
        "assumptions": {"tokens": trained[0].budget_tokens if trained else tokens, "seq_len": seq_len,
                        "global_batch": global_batch, "input_len": input_len, "output_len": output_len,
                        "max_tpot_ms": max_tpot_ms, "max_ttft_ms": max_ttft_ms, "max_days": max_days},
        "training": [_training(e) for e in sweep.shortlist(trained, 1)],
        "serving": [_serving(e) for e in sweep.shortlist(served, 1)] if shape.causal else [],
        "serving_note": "" if shape.causal else "an encoder: no decode to serve (serving estimates cover causal LMs)",
        "band": {"training": constants.band_training, "serving": constants.band_serving,
                 "ttft": constants.band_ttft},
        "checked_on": {"training": constants.checked_on("training"), "serving": constants.checked_on("serving")},
        "notes": notes,
    }


def _training(est: Any) -> dict[str, Any]:
    data = est.to_dict()
    keep = ("instance", "nodes", "layout", "seq_len", "global_batch")
    return {**{k: data[k] for k in keep}, "layout_text": str(est.layout), **{k: data["estimate"][k] for k in (
        "tokens_per_s", "sequences_per_s", "mfu", "usd_per_hour", "usd_per_million_tokens", "price_source",
        "band", "budget")}}


def _serving(est: Any) -> dict[str, Any]:
    data = est.to_dict()
    keep = ("instance", "tp", "replicas", "batch", "input_len", "output_len", "weights")
    return {**{k: data[k] for k in keep}, **{k: data["estimate"][k] for k in (
        "ttft_s", "tpot_s", "output_tokens_per_s", "mfu", "usd_per_hour", "usd_per_million_tokens", "price_source",
        "band", "band_ttft", "max_tpot_s")}}


def write(run_dir: str | Path, record: dict[str, Any]) -> Path:
    """Write the record into the run directory (created if needed)."""
    return RunDir(run_dir).write_side_record(RECORD, record)


def read(run_dir: str | Path) -> dict[str, Any] | None:
    """The run directory's cost record, or None when there is none (or it is malformed)."""
    record = RunDir(run_dir).read_side_record(RECORD)
    return record if well_formed(record) else None


def well_formed(record: Any) -> bool:
    """The fields the report's section reads, with their types (a hand-edited file must not break the page)."""
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        return False
    if not (isinstance(record.get("model"), str) and isinstance(record.get("band"), dict)
            and isinstance(record.get("checked_on"), dict) and isinstance(record.get("notes"), list)):
        return False
    rows = [(r, "tokens_per_s") for r in record.get("training", [])] + \
        [(r, "output_tokens_per_s") for r in record.get("serving", [])]
    return all(isinstance(r, dict) and isinstance(r.get(rate), (int, float)) and isinstance(r.get("instance"), str)
               and isinstance(r.get("price_source"), str)
               and (r.get("usd_per_million_tokens") is None or isinstance(r["usd_per_million_tokens"], (int, float)))
               for r, rate in rows)
