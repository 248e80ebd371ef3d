"""Notebook 09 (port your script): a clean jupytext pair, and (marked `notebooks`) executed by papermill: scan,
diff and a run of the bundled example training script on the simulated device."""

from __future__ import annotations

import pytest

from lesson_notebooks import NOTEBOOKS, assert_clean_pair, execute
from test_port import assert_ran_the_example

NOTEBOOK = NOTEBOOKS / "09_port_your_script.ipynb"


def test_notebook_09_is_clean_parameterized_and_paired_with_its_source():
    assert_clean_pair(NOTEBOOK)


@pytest.mark.notebooks
def test_notebook_09_scans_diffs_and_runs_the_example(tmp_path, forked_kernels):
    text, shows_an_image = execute(NOTEBOOK, tmp_path, forked_kernels, steps=2)
    assert "REWRITE (fixed by --write)  [synchronize]  torch.cuda.synchronize" in text
    assert "+        torch.neuron.synchronize()" in text
    assert_ran_the_example(text, nproc=1)  # the run's summary, as `neuronkit port --run` prints it
    assert "1 file: 17 CUDA-specific uses (13 rewrite, 13 fixed by --write; 4 decide; 0 blockers) -> ready" in text
    assert shows_an_image
