"""`nki_op` and `wrap_nki` as torch_neuronx defines them, over neuronkit's NKI interpreter.

Modelled on the real backend's `torch_neuronx/nki_hop.py` (source snapshot parmoham-aws/test-repo-parmoham):
`nki_op(name, mutates_args)` is a `torch.library.custom_op` whose eager kernel calls the function with
the higher-order op bypassed, whose fake kernel is the function itself, and which registers a
`FunctionalTensorMode` rule so AOTAutograd traces into the function. Inside a trace, a kernel call goes
through the higher-order op `nki_kernel_wrapper` (kernel index in a registry, grid, arguments), which
becomes one node of the compiled graph; its output shapes come from compiling the kernel for the
arguments' shapes (the real backend asks the NKI compiler's `dump_config`). Differences: the op is
functional here (it returns the new values of the inputs a kernel writes, and the caller copies them
back) where the real one records input/output aliases; kernels never run the compiler."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Generator, Iterable
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree
from torch._C import DispatchKey
from torch._dynamo import allow_in_graph
from torch._library.custom_ops import custom_op
from torch._library.infer_schema import infer_schema
from torch._ops import HigherOrderOperator
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.fx.experimental.proxy_tensor import (
    ProxyTorchDispatchMode,
    disable_proxy_modes_tracing,
    track_tensor_tree,
)

from neuronkit.device.simulator import compiled_graphs, native, tracking
from neuronkit.device.simulator import kernel as device
from neuronkit.nki import LAUNCH_PREFIX, cost
from neuronkit.nki.dtypes import as_dtype
from neuronkit.nki.runtime import (
    KernelFunction,
    Trace,
    _describe,
    _flat,
    execute,
    grid_of,
    run_arrays,
    signature,
    spec_of,
)

NKI_OPS: set[str] = set()  # qualified names of the ops registered with nki_op ("mylib::pt_nki_sin")
_wrap_enabled = threading.local()


def is_wrap_nki_enabled() -> bool:
    return getattr(_wrap_enabled, "value", True)


@contextlib.contextmanager
def set_wrap_nki_enabled(enabled: bool) -> Generator[None, None, None]:
    """Whether kernel calls on tensors being traced go through the higher-order op (default) or run."""
    previous = is_wrap_nki_enabled()
    _wrap_enabled.value = enabled
    try:
        yield
    finally:
        _wrap_enabled.value = previous


class _Registry:
    """Kernels by index, so a graph node names its kernel by an integer."""

    def __init__(self) -> None:
        self.kernels: list[KernelFunction] = []
        self.index: dict[int, int] = {}

    def add(self, kernel: KernelFunction) -> int:
        if id(kernel) not in self.index:
            self.index[id(kernel)] = len(self.kernels)
            self.kernels.append(kernel)
        return self.index[id(kernel)]


kernel_registry = _Registry()


# ---------------------------------------------------------------------------------------------------
# Running a kernel on torch tensors


def launch(kernel: KernelFunction, grid: tuple[int, ...], names: list[str], values: list[Any]) -> Any:
    """A kernel called with torch tensors: through the higher-order op while tracing, else run now."""
    if _tracing(values):
        return _through_hop(kernel, grid, names, values)
    return run(kernel, grid, names, values, functional=False)


def _tracing(values: list[Any]) -> bool:
    if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.PROXY) is not None:
        return True
    return any(isinstance(v, (FakeTensor, FunctionalTensor)) or (isinstance(v, torch.Tensor) and v.is_meta)
               for v in values)


def _through_hop(kernel: KernelFunction, grid: tuple[int, ...], names: list[str], values: list[Any]) -> Any:
    index = kernel_registry.add(kernel)
    returned, single, slots = _plan(index, grid, tuple(names), spec_of(values))
    outs = nki_kernel_wrapper(kernel_idx=index, grid=grid, args=tuple(values), arg_names=tuple(names))
    if not any(isinstance(v, FunctionalTensor) for v in values):  # functionalization replaces them itself
        for i, slot in slots:
            values[i].copy_(outs[slot])
    results = [values[i] if i is not None else outs[k] for k, i in enumerate(returned)]
    if not results:
        return None
    return results[0] if single else tuple(results)


@torch._dynamo.assume_constant_result
def _plan(kernel_idx: int, grid: tuple[int, ...], names: tuple[str, ...], spec: tuple) -> tuple:
    """(for each returned value the input it is or None, whether one tensor is returned, (input, output
    slot) of each written input). Constant for Dynamo, which then does not trace the interpreter."""
    trace = kernel_registry.kernels[kernel_idx].trace(grid, list(names), spec)
    return tuple(o.input for o in trace.outputs), trace.single, tuple(_mutation_slots(trace).items())


def _mutation_slots(trace: Trace) -> dict[int, int]:
    """Which output of the higher-order op holds the new value of each input the kernel writes."""
    slots, extra = {}, len(trace.outputs)
    for i in trace.mutated:
        returned = next((k for k, o in enumerate(trace.outputs) if o.input == i), None)
        if returned is None:
            returned, extra = extra, extra + 1
        slots[i] = returned
    return slots


def run(kernel: KernelFunction, grid: tuple[int, ...], names: list[str], values: list[Any], functional: bool) -> Any:
    """Interpret the kernel on real tensors. In place: inputs the kernel stored into are updated and its
    results returned. Functional: the op's outputs (results, then new values of written inputs)."""
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    on_device = tensors[0].device
    other = next((t.device for t in tensors if t.device.type != on_device.type), None)
    if other is not None:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{on_device} and {other}! (when launching NKI kernel {kernel.__name__})")
    arrays = [_host_array(v) if isinstance(v, torch.Tensor) else v for v in values]
    dtypes = [as_dtype(v.dtype) if isinstance(v, torch.Tensor) else None for v in values]
    sig = signature(kernel, grid, values)
    key, hit = _compile(on_device, sig)
    start = device._perf_ns()
    result, args, launch_state = execute(kernel, grid, names, arrays, dtypes, abstract=False)
    duration = device._perf_ns() - start
    trace = kernel.traces.get((grid, spec_of(values)))
    if trace is None:  # this launch was the compilation
        trace = kernel.traces[(grid, spec_of(values))] = _describe(result, args, launch_state)
    fresh = [_to_torch(a.data, a.dtype.torch, on_device) for a in _flat(result)]
    if functional:
        slots = _mutation_slots(trace)
        extra = [_to_torch(args[i].data, values[i].dtype, on_device)
                 for i, slot in sorted(slots.items(), key=lambda kv: kv[1]) if slot >= len(trace.outputs)]
        outputs = tuple(fresh) + tuple(extra)
    else:
        for i in trace.mutated:
            _write_back(values[i], args[i].data)
        results = [values[o.input] if o.input is not None else fresh[k] for k, o in enumerate(trace.outputs)]
        outputs = None if not results else results[0] if trace.single else tuple(results)
    written = [values[i] for i in trace.mutated]
    estimate = launch_state.ledger.estimate()
    cost.note(LAUNCH_PREFIX + kernel.__name__, estimate)
    _report(kernel, on_device, start, duration, key, hit, tensors, fresh + written, estimate)
    return outputs


def _compile(on_device: torch.device, sig: tuple) -> tuple[str | None, bool]:
    """One eager compilation per kernel signature on the device, counted in its NEFF cache."""
    if on_device.type != "neuron" or device.STATE is None or compiled_graphs.in_compiled_graph:
        return None, False
    return device.STATE.cache.lookup(("nki_kernel",) + sig)


def _host_array(t: torch.Tensor) -> np.ndarray:
    cpu = device.to_cpu(t) if t.device.type == "neuron" else t
    cpu = cpu.detach()
    return (cpu.float() if cpu.dtype == torch.bfloat16 else cpu).numpy()


def _to_torch(data: np.ndarray, dtype: torch.dtype, on_device: torch.device) -> torch.Tensor:
    cpu = torch.from_numpy(np.array(data)).to(dtype)
    if on_device.type != "neuron":
        return cpu
    return native.wrap(cpu, on_device.index if on_device.index is not None else torch.neuron.current_device())


def _write_back(t: torch.Tensor, data: np.ndarray) -> None:
    cpu = device.to_cpu(t) if t.device.type == "neuron" else t.detach()
    cpu.copy_(torch.from_numpy(np.array(data)).to(t.dtype))


def _report(kernel: KernelFunction, on_device: torch.device, start: int, duration: int, key: str | None, hit: bool,
            tensors: list[torch.Tensor], outputs: list[torch.Tensor], estimate: cost.EngineEstimate) -> None:
    """Record the launch as a device op: op tracking and, while profiling, the profiler's observers (with
    the launch's estimated engine time beside its measured interpreter time)."""
    if on_device.type != "neuron":
        return
    name = LAUNCH_PREFIX + kernel.__name__
    tracking.record_executed(name)
    observers = tracking.observers
    if device._profiler_enabled() and tracking.profiler_observers:
        observers = observers + tracking.profiler_observers
    if not observers:
        return
    event = tracking.OpEvent(name=name, overload="default", category="native", fallback=False, start_ns=start,
                             duration_ns=duration, cache_key=key, cache_hit=hit,
                             input_shapes=tuple(tuple(t.shape) for t in tensors),
                             input_dtypes=tuple(str(t.dtype) for t in tensors), bytes_in=device.nbytes(tensors),
                             bytes_out=device.nbytes(outputs), engine_estimate=estimate)
    for observer in observers:
        observer(event)


# ---------------------------------------------------------------------------------------------------
# The higher-order op


class NKIKernelWrapper(HigherOrderOperator):
    """`nki_kernel_wrapper(kernel_idx, grid, args, arg_names)`: one NKI kernel launch as a graph node."""

    def __init__(self) -> None:
        super().__init__("nki_kernel_wrapper", cacheable=True)

    def __call__(self, *, kernel_idx: int, grid: tuple[int, ...], args: tuple, arg_names: tuple) -> Any:
        return super().__call__(kernel_idx=kernel_idx, grid=grid, args=args, arg_names=arg_names)


nki_kernel_wrapper = allow_in_graph(NKIKernelWrapper())


@nki_kernel_wrapper.py_impl(DispatchKey.CompositeExplicitAutograd)
def _dense(*, kernel_idx: int, grid: tuple[int, ...], args: tuple, arg_names: tuple) -> tuple:
    return run(kernel_registry.kernels[kernel_idx], grid, list(arg_names), list(args), functional=True)


@nki_kernel_wrapper.py_impl(FakeTensorMode)
def _fake(mode: FakeTensorMode, *, kernel_idx: int, grid: tuple[int, ...], args: tuple, arg_names: tuple) -> tuple:
    kernel = kernel_registry.kernels[kernel_idx]
    trace = kernel.trace(grid, list(arg_names), spec_of(list(args)))
    cost.note(LAUNCH_PREFIX + kernel.__name__, trace.estimate)  # a traced launch (audit, compile)
    on_device = next(a.device for a in args if isinstance(a, torch.Tensor))
    shapes = [(o.shape, o.dtype.torch) for o in trace.outputs]
    shapes += [(tuple(args[i].shape), args[i].dtype) for i, slot in sorted(_mutation_slots(trace).items(),
                                                                           key=lambda kv: kv[1])
               if slot >= len(trace.outputs)]
    with mode:
        return tuple(torch.empty(shape, dtype=dtype, device=on_device) for shape, dtype in shapes)


@nki_kernel_wrapper.py_impl(ProxyTorchDispatchMode)
def _proxy(proxy_mode: ProxyTorchDispatchMode, *, kernel_idx: int, grid: tuple[int, ...], args: tuple,
           arg_names: tuple) -> tuple:
    node_args = {"kernel_idx": kernel_idx, "grid": grid, "args": args, "arg_names": arg_names}
    with disable_proxy_modes_tracing():
        out = nki_kernel_wrapper(**node_args)
    proxy_args = pytree.tree_map(proxy_mode.tracer.unwrap_proxy, node_args)
    out_proxy = proxy_mode.tracer.create_proxy("call_function", nki_kernel_wrapper, (), proxy_args,
                                               name=kernel_registry.kernels[kernel_idx].__name__)
    return track_tensor_tree(out, out_proxy, constant=None, tracer=proxy_mode.tracer)


@nki_kernel_wrapper.py_functionalize_impl
def _functionalize(ctx: Any, *, kernel_idx: int, grid: tuple[int, ...], args: tuple, arg_names: tuple) -> tuple:
    """The op is functional; inputs the kernel writes take their new values from its outputs, as the
    real backend's functionalization does with the compiler's operand/output aliases."""
    unwrapped = tuple(ctx.unwrap_tensors(a) if isinstance(a, torch.Tensor) else a for a in args)
    with ctx.redispatch_to_next():
        out = nki_kernel_wrapper(kernel_idx=kernel_idx, grid=grid, args=unwrapped, arg_names=arg_names)
    trace = kernel_registry.kernels[kernel_idx].trace(grid, list(arg_names), spec_of(list(unwrapped)))
    for i, slot in _mutation_slots(trace).items():
        ctx.replace(args[i], out[slot])
        ctx.mark_mutation_hidden_from_autograd(args[i])
        ctx.commit_update(args[i])
        ctx.sync(args[i])
    return ctx.wrap_tensors(out)


for _key in (DispatchKey.PythonDispatcher, DispatchKey.PythonTLSSnapshot, DispatchKey.ADInplaceOrView,
             DispatchKey.BackendSelect, DispatchKey.AutocastCPU, DispatchKey.AutocastPrivateUse1,
             DispatchKey.AutogradCPU, DispatchKey.AutogradPrivateUse1):
    nki_kernel_wrapper.fallthrough(_key)


# ---------------------------------------------------------------------------------------------------
# The public API


class _Wrapped:
    """`wrap_nki(kernel)`: a kernel whose calls always go through the higher-order op when enabled."""

    def __init__(self, kernel: KernelFunction, grid: tuple[int, ...] = ()) -> None:
        self.kernel = kernel
        self.grid = grid

    def __getitem__(self, grid: Any) -> _Wrapped:
        return _Wrapped(self.kernel, grid_of(grid))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        names, values = self.kernel.bind(args, kwargs)
        if not any(isinstance(v, torch.Tensor) for v in values):
            return run_arrays(self.kernel, self.grid, names, values)
        if is_wrap_nki_enabled():
            return _through_hop(self.kernel, self.grid, names, values)
        return launch(self.kernel, self.grid, names, values)


def wrap_nki(nki_kernel: KernelFunction) -> _Wrapped:
    """Make an `@nki.jit` kernel traceable into a torch.compile graph (torch_neuronx.wrap_nki)."""
    if not isinstance(nki_kernel, KernelFunction):
        raise TypeError(f"wrap_nki takes an @nki.jit kernel, got {type(nki_kernel).__name__}")
    kernel_registry.add(nki_kernel)
    return _Wrapped(nki_kernel)


def nki_op(name: str, fn: Callable | None = None, mutates_args: str | Iterable[str] = {}) -> Callable:
    """A custom operator backed by NKI kernels (torch_neuronx.nki_op; "similar to triton_op").

    The function runs the kernels eagerly, serves as the op's fake kernel, and is traced into by
    torch.compile so each kernel launch is one node of the graph. Add a backward with
    `op.register_autograd(backward, setup_context=...)`."""

    def dec(fn: Callable) -> Any:
        def backend_fn(*args: Any, **kwargs: Any) -> Any:
            with set_wrap_nki_enabled(False):  # eager: bypass the higher-order op
                return _noting(name, fn, args, kwargs)

        def fake_fn(*args: Any, **kwargs: Any) -> Any:
            return _noting(name, fn, args, kwargs)

        op = custom_op(name, backend_fn, mutates_args=mutates_args, schema=infer_schema(fn, mutates_args=mutates_args))
        op.register_fake(fake_fn)

        def functional_decomp(mode: Any, _op: Any, types: Any, args: Any, kwargs: Any) -> Any:
            known = (torch.Tensor, FunctionalTensor)
            if any(not issubclass(t, FakeTensor) and t not in known for t in types):
                return NotImplemented
            with mode:
                return fn(*args, **kwargs)

        op.register_torch_dispatch(FunctionalTensorMode, functional_decomp)
        NKI_OPS.add(name)
        return op

    return dec if fn is None else dec(fn)


def _noting(name: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
    """Call the op's function; its kernel launches' estimates, added up, become the op's."""
    with cost.collecting() as launches:
        result = fn(*args, **kwargs)
    estimate = cost.combined(launches)
    if estimate is not None:
        cost.note(name, estimate)
    return result
