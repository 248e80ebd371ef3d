"""Files neuronkit ships inside the package, found with `importlib.resources`.

The op-support table, the Trainium hardware figures, the bundled models, the sample prompts
(`neuronkit/data/`) and the workbook notebooks (`neuronkit/notebooks`, a link to the checkout's
`notebooks/` that the wheel carries as files) are package data, so `pip install` gives a device with its
policy and a workbook with its notebooks wherever it is installed; nothing looks for a source checkout.
"""

from __future__ import annotations

import tomllib
from importlib.resources import files
from pathlib import Path
from typing import Any


def package_path(*parts: str) -> Path:
    """The file or folder `parts` inside the installed `neuronkit` package, as a filesystem path.

    Papermill, Jupyter and transformers need real paths, so neuronkit must be installed as files (as pip
    installs a wheel), not imported from a zip archive.
    """
    root = files("neuronkit")
    if not isinstance(root, Path):
        raise RuntimeError(f"neuronkit is imported from an archive ({root}); install it with pip as files")
    return root.joinpath(*parts)


def data_dir() -> Path:
    """`neuronkit/data/`: op_support.toml, trainium_hardware.toml, sample_prompts.txt, models/."""
    return package_path("data")


def data_toml(name: str) -> dict[str, Any]:
    """The TOML table `neuronkit/data/<name>`, read anew on each call (callers cache what they keep)."""
    with (data_dir() / name).open("rb") as fh:
        return tomllib.load(fh)


def notebooks_dir() -> Path:
    """The workbook notebooks the package ships (00_environment.ipynb ... 06_report.ipynb)."""
    return package_path("notebooks")
