"""nbval's own plugin on the workbook, as notebooks/README.md tells a developer to run it by hand: the two
commands are read from that page and run on the first notebook alone (the fastest; each later one needs the
records of those before it). The suite's other nbval check compares the whole sequence's checked cells with
nbval's functions on notebooks the workbook already executed (tests/notebooks/test_notebooks.py); this one keeps the
documented command working: the prepared copy, `pytest --nbval-lax`, the kernel, the sanitizers."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from neuronkit.workbook import NOTEBOOKS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "notebooks" / "README.md"
PLACEHOLDER_OUT = "build/nbval"


def _documented_commands() -> tuple[list[str], list[str]]:
    """The README's prepare command and its `pytest --nbval-lax` command, each as arguments."""
    text = README.read_text(encoding="utf-8").replace("\\\n", " ")
    prepare = re.search(r"^\.venv/bin/python tests/nbval/prepare\.py .*$", text, re.M)
    plugin = re.search(r"^\.venv/bin/python -m pytest --nbval-lax .*$", text, re.M)
    assert prepare and plugin, "notebooks/README.md no longer shows the nbval commands"
    return shlex.split(prepare.group()), shlex.split(plugin.group())


@pytest.mark.notebooks
@pytest.mark.subprocess
def test_nbval_plugin_passes_on_the_prepared_first_notebook_with_the_documented_commands(tmp_path: Path,
                                                                                        forked_kernels) -> None:
    prepare_command, plugin_command = _documented_commands()
    assert prepare_command[:2] == [".venv/bin/python", "tests/nbval/prepare.py"] and PLACEHOLDER_OUT in prepare_command
    spec = importlib.util.spec_from_file_location("nbval_prepare", ROOT / prepare_command[1])
    prepare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prepare)
    out = tmp_path / "nbval"
    arguments = [str(out) if a == PLACEHOLDER_OUT else a for a in prepare_command[2:]]
    assert prepare.main([*arguments, "--notebook", NOTEBOOKS[0]]) == 0
    assert sorted(p.name for p in out.glob("*.ipynb")) == [NOTEBOOKS[0]]

    assert plugin_command[0] == ".venv/bin/python" and PLACEHOLDER_OUT in plugin_command
    command = [sys.executable, *(str(out) if a == PLACEHOLDER_OUT else a for a in plugin_command[1:])]
    # Not a worker of this session (no PYTEST_ variables), and its kernel `neuronkit` forked from the session's
    # server (conftest's ForkedKernels) instead of importing the libraries again (~8 CPU-s).
    env = forked_kernels.env
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.fullmatch(r"=* \d+ passed.* =*", summary) and "failed" not in summary, summary
