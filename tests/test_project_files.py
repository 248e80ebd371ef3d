"""The project's own files agree with each other: conda's environment.yml mirrors pyproject.toml, the lock
files pin (with hashes) the CPU torch and a version within pyproject's ranges of everything it asks for, and
CI runs the README's test command."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml
from conftest import ROOT
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_environment_yml_matches_pyproject():
    project = _pyproject()["project"]
    wanted = set(project["dependencies"]).union(*project["optional-dependencies"].values())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert set(pip_section) == wanted
    assert "python=3.11" in env["dependencies"]


def _locked(torch: str) -> dict[str, tuple[Version, list[str]]]:
    """lock/torch<release>.txt as {name: (version, hashes)}."""
    text = (ROOT / "lock" / f"torch{torch}.txt").read_text()
    entries = re.findall(r"^([A-Za-z0-9._-]+)==(\S+)((?:\s*\\\s*--hash=sha256:[0-9a-f]{64})*)", text, re.M)
    return {canonicalize_name(name): (Version(version), re.findall(r"sha256:[0-9a-f]{64}", hashes))
            for name, version, hashes in entries}


@pytest.mark.parametrize(("torch", "pins"), [("2.13", {"torch": "2.13.0+cpu"}),
                                             ("2.14", {"torch": "2.14.1", "torchvision": "0.29.1"})])
def test_lock_pins_the_torch_build_and_a_version_of_everything_pyproject_asks_for(torch, pins):
    """Each lock pins its torch build (the CPU one for 2.13) and every requirement of pyproject.toml (its groups,
    the native build's requirements, torchtitan) to one version within pyproject's range, each with its hashes:
    a pyproject.toml edited without `make lock` fails here, not on a fresh machine."""
    locked = _locked(torch)
    assert all(hashes for _, hashes in locked.values()), "every locked package carries its hashes"
    assert {name: str(locked[name][0]) for name in pins} == pins
    project = _pyproject()
    build = [r for r in project["build-system"]["requires"] if not r.startswith("torch")]  # torch: the pin above
    titan = re.search(r"^TITAN\s*:=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    wanted = [*project["project"]["dependencies"], *build, titan,
              *(r for group in project["project"]["optional-dependencies"].values() for r in group)]
    for requirement in map(Requirement, wanted):
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{name} is not in lock/torch{torch}.txt: run `make lock`"
        assert requirement.specifier.contains(locked[name][0], prereleases=True), \
            f"lock/torch{torch}.txt pins {name}=={locked[name][0]}, outside pyproject's {requirement}: run `make lock`"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make workbook" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()
