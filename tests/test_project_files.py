"""The project's own files agree with each other: conda's environment.yml mirrors pyproject.toml,
torch is pinned to the CPU build, and CI runs the README's test command."""

from __future__ import annotations

import tomllib

import yaml
from conftest import ROOT


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_environment_yml_matches_pyproject():
    project = _pyproject()["project"]
    wanted = set(project["dependencies"]).union(*project["optional-dependencies"].values())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert set(pip_section) == wanted
    assert "python=3.11" in env["dependencies"]


def test_torch_is_pinned_to_2_13_0():
    assert "torch==2.13.0" in _pyproject()["project"]["dependencies"]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make workbook" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()
