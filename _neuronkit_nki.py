"""`import nki` (and `neuronxcc.nki`) in a fresh interpreter, before torch, on a machine without the Neuron SDK.

neuronkit's stand-in `nki` (neuronkit/nki/modules.py) is installed with the simulated device, which loads on
`import torch`. NKI's own docs and NKI-lib's modules start with `import nki`, so the installed
`neuronkit-nki.pth` (setup.py) imports this module at interpreter start-up, and it puts a finder in front of
`sys.meta_path` that answers for `nki` and `neuronxcc` only when no real package of that name is on
sys.path (PyPI's placeholders, whose import raises "WRONG PACKAGE", count as absent, as in
neuronkit.device.detect). The real `nki`, when installed, always wins. Standard library only, and nothing
is imported until `nki` is: this runs in every interpreter of the environment.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

_NAMES = ("nki", "neuronxcc")
_PLACEHOLDER_MARK = "WRONG PACKAGE"
_PLACEHOLDER_MAX_BYTES = 64 * 1024  # a placeholder is a few lines; the real packages are far larger


def is_placeholder(origin: str | None) -> bool:
    """Whether the module file at `origin` is one of PyPI's placeholders for the Neuron packages (read, not
    imported: its import raises)."""
    if not origin or not origin.endswith(".py") or not os.path.isfile(origin) or \
            os.path.getsize(origin) > _PLACEHOLDER_MAX_BYTES:
        return False
    with open(origin, encoding="utf-8", errors="replace") as fh:
        return _PLACEHOLDER_MARK in fh.read().upper()


class StandInFinder(importlib.abc.MetaPathFinder):
    """Finds neuronkit's stand-in for `nki` / `neuronxcc` when no real package of that name is installed."""

    _busy = False  # neuronkit's own check for a real package (modules.usable) imports through this finder

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001, ANN201 - importlib's protocol
        if fullname not in _NAMES or StandInFinder._busy or os.environ.get("NEURONKIT_SIMULATOR") == "0":
            return None
        real = importlib.machinery.PathFinder.find_spec(fullname)
        if real is not None and not is_placeholder(real.origin):
            return None
        StandInFinder._busy = True
        try:
            from neuronkit.nki import modules  # imports torch, whose autoload may already install them

            if fullname not in sys.modules:
                modules.install()
        finally:
            StandInFinder._busy = False
        installed = sys.modules.get(fullname)  # its spec's loader hands the import system this module
        return installed.__spec__ if getattr(installed, "__neuronkit_simulated__", False) else None


def install() -> None:
    """Put the finder first on sys.meta_path (once)."""
    if not any(isinstance(finder, StandInFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, StandInFinder())


install()
