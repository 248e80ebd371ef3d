"""The top level of the stand-in `nki` module: `nki.jit` and the simulator entry points."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neuronkit.nki import isa, language  # noqa: F401 - `nki.language` / `nki.isa` as attributes
from neuronkit.nki.dtypes import DType as dtype  # noqa: F401 - `nki.dtype` in annotations
from neuronkit.nki.jit import Kernel


def jit(func: Callable | None = None, **options: Any) -> Any:
    """`@nki.jit` / `@nki.jit(mode=...)`: make a function an NKI kernel (interpreted on the CPU here)."""
    if func is None:
        return lambda f: Kernel(f, **options)
    return Kernel(func, **options)


baremetal = trace = jit


def simulate(kernel: Any) -> Kernel:
    """`nki.simulate(kernel)(*args)`: run a kernel on NumPy arrays on the CPU."""
    return kernel if isinstance(kernel, Kernel) else Kernel(kernel)


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """The older `nki.simulate_kernel(kernel, *args)`."""
    return simulate(kernel)(*args, **kwargs)
