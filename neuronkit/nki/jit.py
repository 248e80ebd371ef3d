"""`@nki.jit` kernels as a user calls them: `kernel(...)` or `kernel[grid](...)`, run on NumPy arrays by
the interpreter (`runtime`) or on torch tensors through the torch integration (`hop`)."""

from __future__ import annotations

from typing import Any

import torch

from neuronkit.nki.runtime import KernelFunction, grid_of, run_arrays


class Kernel(KernelFunction):
    """What `@nki.jit` returns: call it, or launch it over an SPMD grid with `kernel[gx, gy](...)`."""

    def __getitem__(self, grid: Any) -> Launcher:
        return Launcher(self, grid_of(grid))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return Launcher(self, ())(*args, **kwargs)


class Launcher:
    """A kernel bound to a launch grid."""

    def __init__(self, kernel: KernelFunction, grid: tuple[int, ...]) -> None:
        self.kernel = kernel
        self.grid = grid

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        names, values = self.kernel.bind(args, kwargs)
        if any(isinstance(v, torch.Tensor) for v in values):
            # the torch integration imports torch._dynamo, which a NumPy-only kernel must not pay for
            from neuronkit.nki import hop

            return hop.launch(self.kernel, self.grid, names, values)
        return run_arrays(self.kernel, self.grid, names, values)
