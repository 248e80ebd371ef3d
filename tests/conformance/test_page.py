"""docs/fidelity.md is generated from the policy, this suite and the known differences."""

from __future__ import annotations

import ast
import json

from neuronkit.policy import TORCH_RELEASES, torch_release
from tests.conformance import build_page


def test_fidelity_page_is_up_to_date():
    """Regenerate with `python tests/conformance/build_page.py` after changing a rule, a test or a difference."""
    assert build_page.PAGE.read_text() == build_page.render()


def test_the_simulators_record_is_the_running_torchs_and_covers_every_release():
    """The page's simulator column per torch release (simulated_counts.json) is what the simulator's
    registrations give under the running torch, and there is a record for every supported release and a table
    for each: regenerate with `python tests/conformance/build_page.py` under each venv."""
    record = json.loads(build_page.SIMULATED.read_text())
    assert list(record) == list(TORCH_RELEASES) == list(build_page._tables())
    assert record[torch_release()] == build_page.simulated_counts()[torch_release()]


def test_every_conformance_test_cites_its_source():
    """Every behaviour test names where the behaviour comes from (S: a path, the docs, or 'inferred')."""
    for path in sorted(build_page.HERE.glob("test_*.py")):
        if path.name == "test_page.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                doc = ast.get_docstring(node) or ""
                assert any(mark in doc for mark in ("S:", "docs", "inferred", "Fidelity audit", "fidelity audit",
                                                    "op_support.toml", "issue 10")), f"{path.name}::{node.name}"
