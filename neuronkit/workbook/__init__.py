"""The migration workbook: the stages its notebooks call, and the runner behind `neuronkit run`.

    from neuronkit.workbook import run_workbook
    result = run_workbook("tiny-qwen3", "runs/tiny-qwen3")   # notebooks 00..06, then report.html

One module per stage (environment, cpu_baseline, eager, audit, torch_compile, profile), each a thin
`run(params, ...)` that calls the library and writes the stage's record (its `neuronkit.evidence` type);
`display` renders records in a notebook, `nbval` prints the checked facts, `widgets` adds JupyterLab
controls.
"""

from __future__ import annotations

from neuronkit.workbook.params import DTYPES, Params, parameters
from neuronkit.workbook.runner import NOTEBOOKS, WorkbookResult, run_workbook

__all__ = ["DTYPES", "NOTEBOOKS", "Params", "WorkbookResult", "parameters", "run_workbook"]
