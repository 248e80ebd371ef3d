"""The op audit stage's record: the audit's own typed document (`neuronkit.op_audit.evidence`)."""

from __future__ import annotations

from neuronkit.op_audit.evidence import AuditEvidence

__all__ = ["AuditEvidence"]
