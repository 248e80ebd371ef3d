"""The report's numbers from the op audit's record: native op support and blocker ops (the headline)."""

from __future__ import annotations

from neuronkit.evidence import AuditEvidence
from neuronkit.reporting.model import KeyNumber, RunRecords


def key_numbers(run: RunRecords) -> list[KeyNumber]:
    """Native op support (share of distinct ops) and the number of blocker ops."""
    tiles = []
    summary = (run.evidence("audit") or AuditEvidence()).summary
    if isinstance(summary.support_pct_ops, (int, float)):
        tiles.append(KeyNumber("Native op support", f"{summary.support_pct_ops:.0f} %",
                               f"of {summary.distinct_ops} distinct ops (op audit)", summary.support_pct_ops, "%"))
    if run.has("audit"):
        count = len({f.op for f in run.blockers})
        tiles.append(KeyNumber("Blocker ops", str(count), "must change before migrating", count, "ops"))
    return tiles
