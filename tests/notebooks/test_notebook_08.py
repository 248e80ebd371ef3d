"""Notebook 08 (write an NKI kernel): a clean jupytext pair, and (marked `notebooks`) executed by papermill."""

from __future__ import annotations

import pytest

from lesson_notebooks import NOTEBOOKS, assert_clean_pair, execute

NOTEBOOK = NOTEBOOKS / "08_write_a_kernel.ipynb"


def test_notebook_08_is_clean_parameterized_and_paired_with_its_source():
    assert_clean_pair(NOTEBOOK)


@pytest.mark.notebooks
def test_notebook_08_runs_and_shows_parity_audit_profile_and_a_rule(tmp_path, forked_kernels):
    text, shows_an_image = execute(NOTEBOOK, tmp_path, forked_kernels, profile_steps=1)
    assert "same next tokens: True" in text
    assert "custom NKI ops: ['lesson08::silu_mul']" in text
    assert "nki::silu_mul_kernel: 2 calls, classification native" in text
    assert "estimated engine time on trn2" in text and "nki_est_us" in text
    assert "spans 160 partitions, but SBUF and PSUM have 128" in text
    assert "within rtol=atol=1e-2: True" in text  # "Start from NKI-lib" (NKI-lib's kernel or the lesson's)
    assert "both within 1e-4: True" in text  # the same kernel as an nki_op: backward and torch.compile
    assert shows_an_image
