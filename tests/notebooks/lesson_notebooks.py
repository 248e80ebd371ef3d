"""Standalone lesson notebooks (07 onwards, outside the stage workbook): the checks each one's test shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jupytext
import nbformat
import papermill

from neuronkit.kernels.starter import KERNEL_NAME, shutdown

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def assert_clean_pair(notebook: Path) -> None:
    """Committed without outputs, a `parameters` cell first, the project's kernel, the same cells as its
    jupytext source, and a title naming its number."""
    nb = nbformat.read(notebook, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert nb.cells[0].source.startswith(f"# {notebook.name[:2]} ·") and code[0].metadata.get("tags") == ["parameters"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert nb.metadata.kernelspec.name == KERNEL_NAME
    source = jupytext.read(notebook.with_suffix(".py"))
    assert [c.source for c in source.cells] == [c.source for c in nb.cells]


def execute(notebook: Path, out_dir: Path, kernels: Any, **parameters: Any) -> tuple[str, bool]:
    """Run the notebook with papermill into `out_dir` (whose plots the conftest then checks) on a kernel of
    `kernels` (conftest's `forked_kernels`); return the text its code cells printed and whether it showed an
    image."""
    output = out_dir / notebook.name
    km = kernels.km(notebook.parent)
    try:
        papermill.execute_notebook(str(notebook), str(output), parameters=parameters, kernel_name=KERNEL_NAME,
                                   cwd=str(notebook.parent), progress_bar=False, km=km)
    finally:
        shutdown(km)
    outputs = [o for c in nbformat.read(output, as_version=4).cells if c.cell_type == "code" for o in c.outputs]
    text = "".join(o.get("text", "") for o in outputs)
    return text, any(o.output_type == "display_data" and "image/png" in o.data for o in outputs)
