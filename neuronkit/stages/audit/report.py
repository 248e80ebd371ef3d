"""The report's numbers from the op audit's record: native op support and blocker ops (the headline), and the
model's public PyTorch APIs in AWS's compatibility-table vocabulary (its own block)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from neuronkit.compat.vocabulary import STATUSES
from neuronkit.evidence import AuditEvidence
from neuronkit.pipeline.record import RunDir
from neuronkit.pipeline.stage import STAGE
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


def compat_section(run: RunDir) -> dict[str, Any] | None:
    """The report's "Public PyTorch APIs" block (compat.html.j2) and report.json's `compat`: the audit record's
    `apis`, counted per status. None when the run has no audit; `unavailable` when its record predates them."""
    record = run.read("audit") if "audit" in STAGE else None  # a stage table of one's own may have no audit
    if record is None or record.evidence is None:
        return None
    evidence: AuditEvidence = record.evidence
    if evidence.schema_version < 3 or not evidence.apis:
        return {"unavailable": "the audit record lists no public API calls (a record from before neuronkit listed "
                               "them): rerun the audit stage"}
    apis = [asdict(api) for api in evidence.apis]
    counts = {status: sum(api["status"] == status for api in apis) for status in STATUSES}
    return {"apis": apis, "counts": counts, "phases": evidence.model.phases}
