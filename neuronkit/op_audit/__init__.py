"""Op audit (`neuronkit.audit`): what a model will do on Trainium, before anyone rents one.

`audit(model)` runs the model once under a recorder that lists every ATen op it issues (with dtypes,
shapes and the module that issued it) and classifies each against the Neuron op-support policy:
native, CPU fallback, or a first-release blocker, with a remedy for every finding.

The names are resolved on first use, so that `neuronkit audit`'s command line (`neuronkit.op_audit.cli`)
can refuse bad arguments in one line before the runner loads transformers and Dynamo (seconds).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"AuditReport": "neuronkit.op_audit.report", "OpRecorder": "neuronkit.op_audit.recorder",
            "audit": "neuronkit.op_audit.runner"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'neuronkit.op_audit' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
