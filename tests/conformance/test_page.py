"""docs/fidelity.md is generated from the policy, this suite and the known differences."""

from __future__ import annotations

import ast

from tests.conformance import build_page


def test_fidelity_page_is_up_to_date():
    """Regenerate with `python tests/conformance/build_page.py` after changing a rule, a test or a difference."""
    assert build_page.PAGE.read_text() == build_page.render()


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
