"""NKI on the simulated device: `nki_op` / `wrap_nki` and a CPU interpreter of the NKI language.

- `neuronkit.nki.modules` installs importable `nki` and `neuronxcc.nki` when the real ones are absent;
- `jit` (`@nki.jit`, calls and SPMD launches), `runtime` (the interpreter's side of a kernel), `language`
  and `isa` (the interpreted subset), `tensors` (HBM/SBUF/PSUM tensors and the access rules), `context`
  (on-chip memory in use), `hardware` (neuronkit/data/nki_hardware.toml);
- `hop`: `nki_op`, `wrap_nki` and the `nki_kernel_wrapper` higher-order op, as torch_neuronx has them.

`nki_op` and `wrap_nki` load on first use: they import torch._dynamo, which `import torch` must not pay for.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from neuronkit.nki.errors import NkiRuleError, NkiUninitializedReadWarning

__all__ = ["NkiRuleError", "NkiUninitializedReadWarning", "is_nki_op", "nki_op", "wrap_nki"]
_LAZY = ("nki_op", "wrap_nki")
LAUNCH_PREFIX = "nki::"  # how the device, the profiler and the audit name a kernel launch


def is_nki_op(name: str) -> bool:
    """Whether `name` is a custom NKI op: registered with `nki_op` ("mylib::pt_nki_sin", optionally with an
    overload) or a kernel launch as the device names it ("nki::sin_kernel")."""
    if name.startswith(LAUNCH_PREFIX):
        return True
    hop = sys.modules.get("neuronkit.nki.hop")
    return hop is not None and name.split(".", 1)[0] in hop.NKI_OPS


def nki_launch_name(func: Any, kwargs: dict[str, Any]) -> str | None:
    """`nki::<kernel>` for a call of the `nki_kernel_wrapper` higher-order op, else None."""
    hop = sys.modules.get("neuronkit.nki.hop")
    if hop is None or func is not hop.nki_kernel_wrapper:
        return None
    return LAUNCH_PREFIX + hop.kernel_registry.kernels[kwargs["kernel_idx"]].__name__


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module("neuronkit.nki.hop"), name)
    raise AttributeError(f"module 'neuronkit.nki' has no attribute {name!r}")
