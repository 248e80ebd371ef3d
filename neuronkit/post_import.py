"""Run a callback right after a module is imported (or now, if it already is).

The simulated device must adjust libraries that load after `import torch` (transformers' accelerate
integration, Dynamo's trace rules) without importing them itself: importing them during PyTorch's
backend autoload would slow every `import torch` and risk import cycles.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from types import ModuleType
from typing import Callable

_callbacks: dict[str, list[Callable[[ModuleType], None]]] = {}


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call `callback(module)` once module `name` has executed."""
    if name in sys.modules:
        callback(sys.modules[name])
        return
    _callbacks.setdefault(name, []).append(callback)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _callbacks:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, _callbacks.pop(fullname))
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, callbacks: list[Callable[[ModuleType], None]]) -> None:
        self.loader = loader
        self.callbacks = callbacks

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        for callback in self.callbacks:
            callback(module)
