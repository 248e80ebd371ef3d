"""The NKI interpreter's side of a kernel: binding arguments, tracing per signature, running the body
once per program of an SPMD grid, and moving NumPy data in and out.

A kernel called with NumPy arrays returns NumPy arrays (the SDK's simulator convention); the torch side
(`neuronkit.nki.hop`) returns torch tensors on their device. Kernel inputs are copied into HBM tensors; the
elements a kernel stores into an input are copied back, so `out` parameters work as on the device. On the
`neuron` device each distinct (grid, shapes, dtypes, constant arguments) is one compilation, counted in
the device's NEFF cache like any eager op, and each launch is reported to the profiler as a device op.
This module imports neither `hop` nor `jit`: both build on it."""

from __future__ import annotations

import functools
import inspect
import itertools
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import _disable_current_modes

from neuronkit.nki import context
from neuronkit.nki.cost import EngineEstimate, Ledger
from neuronkit.nki.dtypes import DType, as_dtype
from neuronkit.nki.errors import NkiUninitializedReadWarning, unsupported
from neuronkit.nki.hardware import core
from neuronkit.nki.tensors import NkiTensor


@dataclass(frozen=True)
class Output:
    """One value a kernel returns: an input it was given (`input` is its position) or a new HBM tensor."""

    shape: tuple[int, ...]
    dtype: DType
    input: int | None


@dataclass(frozen=True)
class Trace:
    """What compiling a kernel for one signature tells: its outputs, the inputs it writes, its peak
    on-chip memory per partition, its estimated engine time (neuronkit.nki.cost)."""

    outputs: tuple[Output, ...]
    single: bool  # the kernel returned one tensor, not a tuple
    mutated: tuple[int, ...]
    peak_sbuf: int
    peak_psum: int
    estimate: EngineEstimate


class KernelFunction:
    """A kernel as the interpreter sees it: its function, signature and one trace per argument spec.
    `neuronkit.nki.jit.Kernel` (what `@nki.jit` returns) adds calling and SPMD launches."""

    def __init__(self, func: Any, **options: Any) -> None:
        functools.update_wrapper(self, func)
        self.func = func
        self.sign = inspect.signature(func)
        self.options = options
        self.traces: dict[tuple, Trace] = {}

    def __repr__(self) -> str:
        return f"<nki.jit kernel {self.__name__}>"

    def bind(self, args: tuple, kwargs: dict) -> tuple[list[str], list[Any]]:
        bound = self.sign.bind(*args, **kwargs)
        bound.apply_defaults()
        return list(bound.arguments), list(bound.arguments.values())

    def trace(self, grid: tuple[int, ...], names: list[str], spec: tuple) -> Trace:
        """Compile (interpret on placeholder data) once per argument spec (`spec_of`): outputs, writes,
        peak on-chip memory."""
        key = (grid, spec)
        found = self.traces.get(key)
        if found is None:
            inputs = [np.zeros(s[1], dtype=as_dtype(s[2]).storage) if s[0] == "tensor" else s[1] for s in spec]
            dtypes = [as_dtype(s[2]) if s[0] == "tensor" else None for s in spec]
            result, args, launch = execute(self, grid, names, inputs, dtypes, abstract=True)
            found = self.traces[key] = _describe(result, args, launch)
        return found


def spec_of(values: list[Any]) -> tuple:
    """What a compilation depends on, per argument: ("tensor", shape, dtype) or ("const", value)."""
    return tuple(("tensor", tuple(v.shape), v.dtype) if _is_tensor(v) else ("const", _static(v)) for v in values)


def run_arrays(kernel: KernelFunction, grid: tuple[int, ...], names: list[str], values: list[Any]) -> Any:
    """A kernel called with NumPy arrays (no torch tensor): run now; the elements it stores into an input
    array are copied back, and NumPy arrays are returned."""
    spec_of(values)  # constant arguments must be hashable
    dtypes = [as_dtype(v.dtype) if isinstance(v, np.ndarray) else None for v in values]
    result, args, _ = execute(kernel, grid, names, values, dtypes, abstract=False)
    for value, arg in zip(values, args):
        if isinstance(value, np.ndarray) and arg.stored.any():
            value[...] = arg.data.astype(value.dtype)
    return _map_result(result, lambda t: t.data.copy())


def grid_of(grid: Any) -> tuple[int, ...]:
    """`kernel[2, 2]`, `kernel[(2, 2)]`, `kernel[[2, 2]]` or `kernel[4]` (torch_neuronx maps it through int)."""
    dims = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    if not all(isinstance(d, (int, np.integer)) and d > 0 for d in dims):
        raise unsupported(f"launch grid {grid!r} (neuronkit launches grids of positive integers)")
    return tuple(int(d) for d in dims)


def _is_tensor(v: Any) -> bool:
    return isinstance(v, (np.ndarray, torch.Tensor))


def signature(kernel: KernelFunction, grid: tuple[int, ...], values: list[Any]) -> tuple:
    """What makes two launches the same compiled kernel: grid, tensor shapes/dtypes, constant arguments."""
    spec = tuple((s[0], s[1], str(s[2])) if s[0] == "tensor" else (s[0], repr(s[1])) for s in spec_of(values))
    return (f"{kernel.__module__}.{kernel.__qualname__}", grid, spec)


def _static(v: Any) -> Any:
    """A constant argument as compiled into the kernel: lists become tuples; it must be hashable, as in
    the real backend (torch_neuronx/nki_kernel.py raises for an unhashable NKI parameter)."""
    if isinstance(v, (list, tuple)):
        return tuple(_static(x) for x in v)
    try:
        hash(v)
    except TypeError:
        raise TypeError(f"NKI kernel argument of type {type(v).__name__} is neither a tensor nor a hashable "
                        "constant: constant arguments are compiled into the kernel") from None
    return v


def execute(kernel: KernelFunction, grid: tuple[int, ...], names: list[str], values: list[Any],
            dtypes: list[DType | None], abstract: bool) -> tuple[Any, list[Any], context.Launch]:
    """Run the kernel body once per program of the grid on HBM copies of the array inputs."""
    launch = context.Launch(kernel.__name__, grid, core(), abstract, Ledger())
    args: list[Any] = []
    for name, value, dtype in zip(names, values, dtypes):
        if dtype is None:
            args.append(value)
            continue
        data = np.array(value, dtype=dtype.storage, copy=True)
        args.append(NkiTensor(data, np.ones(data.shape, dtype=bool), dtype, "hbm", name,
                              stored=np.zeros(data.shape, dtype=bool)))
    previous = context.enter(launch)
    try:
        with _disable_current_modes(), warnings.catch_warnings():
            if abstract:
                warnings.simplefilter("ignore", NkiUninitializedReadWarning)
            result = None
            for program in itertools.product(*(range(g) for g in grid)):
                launch.program = program
                launch.shared_seen = 0
                result = kernel.func(*args)
    finally:
        context.enter(previous)
    if not abstract:
        _warn_unwritten_outputs(kernel, result)
    return result, args, launch


def _map_result(result: Any, fn: Any) -> Any:
    if isinstance(result, NkiTensor):
        return fn(result)
    if isinstance(result, (tuple, list)):
        return type(result)(_map_result(r, fn) for r in result)
    return result


def _flat(result: Any) -> list[NkiTensor]:
    if result is None:
        return []
    if isinstance(result, NkiTensor):
        return [result]
    if isinstance(result, (tuple, list)) and all(isinstance(r, NkiTensor) for r in result):
        return list(result)
    raise unsupported(f"returning {type(result).__name__} from a kernel (return HBM tensors or a tuple of them)")


def _describe(result: Any, args: list[Any], launch: context.Launch) -> Trace:
    outputs = []
    for r in _flat(result):
        index = next((i for i, a in enumerate(args) if isinstance(a, NkiTensor) and a.data is r.data), None)
        if r.buffer not in ("hbm", "shared_hbm"):
            raise ValueError(f"kernel {launch.kernel_name} returned {r.describe()}: a kernel returns HBM tensors "
                             "(allocate the output with buffer=nl.shared_hbm and nl.store into it)")
        outputs.append(Output(r.shape, r.dtype, index))
    mutated = tuple(i for i, a in enumerate(args) if isinstance(a, NkiTensor) and a.stored.any())
    return Trace(tuple(outputs), isinstance(result, NkiTensor), mutated, launch.peak["sbuf"], launch.peak["psum"],
                 launch.ledger.estimate())


def _warn_unwritten_outputs(kernel: KernelFunction, result: Any) -> None:
    for r in _flat(result):
        if r.stored is None and not r.written.all():
            warnings.warn(f"kernel {kernel.__name__} returned {r.describe()} with {int((~r.written).sum())} "
                          "element(s) never written: they hold NaN here and whatever the memory held on a device.",
                          NkiUninitializedReadWarning, stacklevel=4)
