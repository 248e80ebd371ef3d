"""Notebook 08 (write an NKI kernel): a clean jupytext pair, and (marked `notebooks`) executed by papermill."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill
import pytest

from neuronkit.workbook.kernel import KERNEL_NAME, ensure_kernel

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "08_write_a_kernel.ipynb"


def test_notebook_08_is_clean_parameterized_and_paired_with_its_source():
    import jupytext

    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert nb.cells[0].source.startswith("# 08 ·") and code[0].metadata.get("tags") == ["parameters"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert nb.metadata.kernelspec.name == KERNEL_NAME
    source = jupytext.read(NOTEBOOK.with_suffix(".py"))
    assert [c.source for c in source.cells] == [c.source for c in nb.cells]


@pytest.mark.notebooks
def test_notebook_08_runs_and_shows_parity_audit_profile_and_a_rule(tmp_path):
    ensure_kernel()
    output = tmp_path / "08.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(output), parameters={"profile_steps": 1},
                               kernel_name=KERNEL_NAME, cwd=str(NOTEBOOK.parent), progress_bar=False)
    nb = nbformat.read(output, as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "same next tokens: True" in text
    assert "custom NKI ops: ['lesson08::silu_mul']" in text
    assert "nki::silu_mul_kernel: 2 calls, classification native" in text
    assert "spans 160 partitions, but SBUF and PSUM have 128" in text
    assert "within rtol=atol=1e-2: True" in text  # "Start from NKI-lib" (NKI-lib's kernel or the lesson's)
    assert "both within 1e-4: True" in text  # the same kernel as an nki_op: backward and torch.compile
    assert any(o.output_type == "display_data" and "image/png" in o.data
               for c in nb.cells if c.cell_type == "code" for o in c.outputs)
