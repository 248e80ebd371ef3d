"""The migration workbook: the stages its notebooks call, and the runner behind `neuronkit run`.

    from neuronkit.workbook import run_workbook
    result = run_workbook("tiny-qwen3", "runs/tiny-qwen3")   # notebooks 00..06, then report.html

One module per stage (environment, cpu_baseline, eager, audit, torch_compile, profile), each a thin
`run(params, ...)` that calls the library and writes the stage's record (its `neuronkit.evidence` type);
`display` renders records in a notebook, `nbval` prints the checked facts, `widgets` adds JupyterLab
controls.
"""

from __future__ import annotations

import importlib
from typing import Any

# Resolved on first use, so that `neuronkit.workbook.kernel` and `.zygote` import without torch (the
# `neuronkit` command starts the fork server before it imports torch: neuronkit/__init__.py).
_EXPORTS = {"DTYPES": "params", "Params": "params", "parameters": "params", "NOTEBOOKS": "runner",
            "WorkbookResult": "runner", "run_workbook": "runner"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'neuronkit.workbook' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"neuronkit.workbook.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
