"""Op audit (`neuronkit.audit`): what a model will do on Trainium, before anyone rents one.

`audit(model)` runs the model once under a recorder that lists every ATen op it issues (with dtypes,
shapes and the module that issued it) and classifies each against the Neuron op-support policy:
native, CPU fallback, or a first-release blocker, with a remedy for every finding.
"""

from neuronkit.op_audit.recorder import OpRecorder
from neuronkit.op_audit.report import AuditReport
from neuronkit.op_audit.runner import audit

__all__ = ["AuditReport", "OpRecorder", "audit"]
