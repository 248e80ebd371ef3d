"""Op audit: what a model will do on Trainium, before anyone rents one.

`audit(model)` runs the model once under a recorder that lists every ATen op it issues (with dtypes,
shapes and the module that issued it) and classifies each against the Neuron op-support policy:
native, CPU fallback, or a first-release blocker, with a remedy for every finding.
"""

import sys
import types

from neuronkit.audit.recorder import OpRecorder
from neuronkit.audit.report import AuditReport
from neuronkit.audit.runner import audit

__all__ = ["AuditReport", "OpRecorder", "audit"]


class _CallablePackage(types.ModuleType):
    """`neuronkit.audit(...)` is the function whether `neuronkit.audit` resolved to it lazily or an
    earlier `import neuronkit.audit.<submodule>` bound the package itself to that name."""

    def __call__(self, *args, **kwargs) -> AuditReport:
        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
