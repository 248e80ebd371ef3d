"""The op audit stage's record: the audit's own typed document, which `neuronkit.audit` builds."""

from __future__ import annotations

from neuronkit.evidence import AuditEvidence

__all__ = ["AuditEvidence"]
