"""Importable `nki` and `neuronxcc.nki` on machines without the Neuron SDK.

On PyPI, `nki`, `neuronx-cc` and `torch-neuronx` are placeholders whose import raises
`ImportError("WRONG PACKAGE ...")` (design/multicore-distributed-nki.md §5); a placeholder counts as
absent. When a usable `nki` / `neuronxcc` is installed, nothing here is installed and the real one is
used. The stand-in modules forward to `neuronkit.nki.*` on first attribute use (so `import torch` stays
fast), and a name outside the interpreted subset raises NotImplementedError naming it."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

from neuronkit.nki.errors import unsupported

# stand-in module name -> the neuronkit module it forwards to
_STANDINS = {
    "nki": "neuronkit.nki.api",
    "nki.language": "neuronkit.nki.language",
    "nki.isa": "neuronkit.nki.isa",
    "nki.isa.constants": "neuronkit.nki.isa_constants",
    "nki.typing": "neuronkit.nki.typing",
}

_PACKAGES = ("nki", "nki.isa")


class _StandIn(types.ModuleType):
    """A module forwarding attribute access to a neuronkit module, loaded on first use."""

    __neuronkit_simulated__ = True

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        target = importlib.import_module(self.__dict__["_target"])
        if not hasattr(target, attr):
            raise unsupported(f"{self.__name__}.{attr}", attribute=True)
        return getattr(target, attr)

    def __dir__(self) -> list[str]:
        return sorted(n for n in vars(importlib.import_module(self.__dict__["_target"])) if not n.startswith("_"))


class _Loader(importlib.abc.Loader):
    """The stand-ins' loader: an import that finds one (through sys.modules, or `_neuronkit_nki`'s finder
    before torch is imported) is handed the module already in sys.modules, not a new empty one."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return sys.modules[spec.name]

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: a stand-in forwards to neuronkit.nki on first attribute use."""


_LOADER = _Loader()


def usable(name: str) -> bool:
    """Whether a real, importable module `name` is installed (a PyPI placeholder is not)."""
    if name in sys.modules:
        return not getattr(sys.modules[name], "__neuronkit_simulated__", False)
    try:
        if importlib.util.find_spec(name) is None:
            return False
        importlib.import_module(name)
    except ImportError:  # the placeholders raise ImportError("WRONG PACKAGE ...") when imported
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]
        return False
    return True


def install() -> bool:
    """Install the stand-in `nki` and `neuronxcc.nki` unless real ones are importable; True if installed."""
    if usable("nki") or usable("neuronxcc"):
        return False
    parents = {}
    for prefix in ("", "neuronxcc."):
        for name, target in _STANDINS.items():
            full = prefix + name
            module = _StandIn(full, f"Stand-in for {full}: neuronkit's CPU interpreter of NKI ({target}).")
            module._target = target
            module.__spec__ = importlib.machinery.ModuleSpec(full, _LOADER, is_package=(name in _PACKAGES))
            if name in _PACKAGES:
                module.__path__ = []
            sys.modules[full] = module
            parents[full] = module
    for full, module in parents.items():
        parent, _, leaf = full.rpartition(".")
        if parent in parents:
            setattr(parents[parent], leaf, module)
    neuronxcc = types.ModuleType("neuronxcc", "Stand-in for the Neuron compiler package: only `neuronxcc.nki`.")
    neuronxcc.__spec__ = importlib.machinery.ModuleSpec("neuronxcc", _LOADER, is_package=True)
    neuronxcc.__path__ = []
    neuronxcc.__neuronkit_simulated__ = True
    neuronxcc.nki = parents["neuronxcc.nki"]
    sys.modules["neuronxcc"] = neuronxcc
    return True
