"""The scale-out record: notebook 07's DDP and FSDP2 runs on simulated cores, for the report's distributed card.

Kept apart from the stage records (`run_dir/stages/`): one file, `run_dir/distributed.json`, written by
`write` and read by the report when present. A scenario has parity when every rank's parameters after the
training steps match one CPU process's within `PARITY_TOL`.

Fields: `ranks`, `devices` (`neuron:0`, ...), `backend`, `simulated`, `parity_tolerance`, `plan` (the plan's
one-line verdict), `note`, and `scenarios` — per run: `max_param_diff`, `parity`, `losses` (mean over ranks
per step), `reference_losses`, and for FSDP2 `full_param_bytes`, `param_bytes_per_rank`,
`device_bytes_per_rank`. The report shows it as its "Scale out" card and under `distributed` in
report.json, outside the verdict; a malformed file is ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuronkit.pipeline.record import RunDir

RECORD = "distributed.json"
PARITY_TOL = 1e-5  # float32 parameters after 2 SGD steps; collectives reorder sums, so not bit-exact


def summarize(results: list[dict[str, Any]], plan: str = "") -> dict[str, Any]:
    """One record from `launch.run`'s per-rank results: parity and per-rank memory for each scenario."""
    names = list(results[0]["scenarios"])
    simulated = all(r.get("simulated", True) for r in results)
    scenarios = {}
    for name in names:
        per_rank = [r["scenarios"][name] for r in results]
        diff = max(s.get("param_diff", 0.0) for s in per_rank)
        steps = zip(*(s.get("losses", []) for s in per_rank))  # each rank's loss on its slice, per step
        entry: dict[str, Any] = {"max_param_diff": diff, "parity": diff < PARITY_TOL,
                                 "losses": [sum(step) / len(step) for step in steps],
                                 "reference_losses": per_rank[0].get("reference_losses", [])}
        if "local_param_bytes" in per_rank[0]:
            entry["full_param_bytes"] = per_rank[0]["full_param_bytes"]
            entry["param_bytes_per_rank"] = [s["local_param_bytes"] for s in per_rank]
            entry["device_bytes_per_rank"] = [s["device_bytes_after_shard"] for s in per_rank]
        scenarios[name] = entry
    return {"ranks": len(results), "devices": [r["device"] for r in results], "backend": results[0]["backend"],
            "parity_tolerance": PARITY_TOL, "scenarios": scenarios, "plan": plan, "simulated": simulated,
            "note": ("simulated cores: collectives ran over gloo on the host; timings say nothing about NeuronLink"
                     if simulated else "NeuronCores of this instance")}


def write(run_dir: str | Path, record: dict[str, Any]) -> Path:
    """Write the record into the run directory (created if needed)."""
    return RunDir(run_dir).write_side_record(RECORD, record)


def read(run_dir: str | Path) -> dict[str, Any] | None:
    """The run directory's scale-out record, or None when notebook 07 did not run there (or wrote junk)."""
    record = RunDir(run_dir).read_side_record(RECORD)
    return record if _well_formed(record) else None


def _well_formed(record: Any) -> bool:
    """The fields the report's card reads, with their types (a hand-edited file must not break the page)."""
    def numbers(value: Any) -> bool:
        return isinstance(value, list) and all(isinstance(x, (int, float)) for x in value)

    if not isinstance(record, dict):
        return False
    fields = {"ranks": int, "devices": list, "backend": str, "parity_tolerance": float, "plan": str, "note": str,
              "simulated": bool, "scenarios": dict}
    if not all(isinstance(record.get(key), kind) for key, kind in fields.items()) or not record["scenarios"]:
        return False
    return all(isinstance(s, dict) and isinstance(s.get("parity"), bool)
               and isinstance(s.get("max_param_diff"), (int, float))
               and numbers(s.get("losses")) and numbers(s.get("reference_losses"))
               and numbers(s.get("param_bytes_per_rank", [])) and isinstance(s.get("full_param_bytes", 0), int)
               for s in record["scenarios"].values())
