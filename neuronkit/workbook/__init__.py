"""The migration workbook's presentation: the runner behind `neuronkit run`, the notebooks' parameters, and
what a notebook shows around a stage record.

    from neuronkit.workbook import run_workbook
    result = run_workbook("tiny-qwen3", "runs/tiny-qwen3")   # notebooks 00..06, then report.html

`runner` executes the notebooks with papermill (each stage's notebook calls its stage folder's
`neuronkit.stages.<name>.run`), `params` validates a notebook's parameters cell, `display` renders records
in a notebook, `lesson` adds key numbers, folded evidence and the "Next" paragraph, `nbval` prints the
checked facts, `widgets` adds JupyterLab controls, `cli` is `neuronkit run`.
"""

from __future__ import annotations

import importlib
from typing import Any

# Resolved on first use: importing the package imports none of its modules (the runner loads transformers).
_EXPORTS = {"DTYPES": "params", "Params": "params", "parameters": "params", "prerequisites": "params",
            "report_dir": "params", "run_directory": "params",
            "NOTEBOOKS": "runner",
            "Execution": "runner", "WorkbookResult": "runner", "run_workbook": "runner"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'neuronkit.workbook' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"neuronkit.workbook.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
