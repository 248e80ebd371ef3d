"""Notebook 09 (port your script): a clean jupytext pair, and (marked `notebooks`) executed by papermill: scan,
diff and a run of the bundled example training script on the simulated device."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill
import pytest

from neuronkit.workbook.kernel import KERNEL_NAME, ensure_kernel

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "09_port_your_script.ipynb"


def test_notebook_09_is_clean_parameterized_and_paired_with_its_source():
    import jupytext

    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert nb.cells[0].source.startswith("# 09 ·") and code[0].metadata.get("tags") == ["parameters"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert nb.metadata.kernelspec.name == KERNEL_NAME
    source = jupytext.read(NOTEBOOK.with_suffix(".py"))
    assert [c.source for c in source.cells] == [c.source for c in nb.cells]


@pytest.mark.notebooks
def test_notebook_09_scans_diffs_and_runs_the_example(tmp_path):
    ensure_kernel()
    output = tmp_path / "09.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(output), parameters={"steps": 2},
                               kernel_name=KERNEL_NAME, cwd=str(NOTEBOOK.parent), progress_bar=False)
    nb = nbformat.read(output, as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "REWRITE (fixed by --write)  [synchronize]  torch.cuda.synchronize" in text
    assert "+        torch.neuron.synchronize()" in text
    assert "1 process: 2/2 optimizer steps" in text and "-> ok" in text
    assert "1 file: 17 CUDA-specific uses (13 rewrite, 13 fixed by --write; 4 decide; 0 blockers) -> ready" in text
    assert any(o.output_type == "display_data" and "image/png" in o.data
               for c in nb.cells if c.cell_type == "code" for o in c.outputs)
