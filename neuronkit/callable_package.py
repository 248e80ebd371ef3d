"""Let a package be called as its namesake function: `neuronkit.audit(...)`, `neuronkit.report(...)`.

The public API names functions after the packages that hold them. Importing any submodule (e.g.
`neuronkit.audit.cli`) binds the package itself to `neuronkit.audit`, replacing the lazily resolved
function; a callable package keeps `neuronkit.audit(...)` working either way.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable


def make_callable(module_name: str, function: Callable[..., Any]) -> None:
    """Make `sys.modules[module_name]` forward calls to `function`."""

    class CallablePackage(types.ModuleType):
        __doc__ = sys.modules[module_name].__doc__

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs)

    sys.modules[module_name].__class__ = CallablePackage
