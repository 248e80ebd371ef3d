"""The simulated device's state and the Python path of its per-op kernel.

A neuron tensor is an ordinary PrivateUse1 TensorImpl whose storage points at CPU memory (zero copy;
design/simulated-device.md, approach A2). Every ATen op that reaches the PrivateUse1 key runs the native
kernel (csrc/kernel.cpp), which applies the op-support policy (native → eager NEFF cache; no lowering →
silent CPU fallback, recorded; first-release gaps → NotImplementedError), runs the op on CPU aliases of
its arguments and maps the results back onto the device according to the schema's alias annotations.
It reads each overload's record from `describe` once, tests the input-aware rules and narrows 64-bit
tensors itself, and sends here (`slow`) the calls that need Python: errors (a blocked op, a call a rule
flags, complex tensors, mixed devices), a device generator, the device's host kernels (device_ops),
profiling and observers, a compiled graph, and the first call of each NEFF signature (which compiles it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from neuronkit import call_rules, preconditions
from neuronkit.device.simulator import compiled_graphs, device_ops, native, rng, tracking
from neuronkit.device.simulator.memory import HbmAccount
from neuronkit.device.simulator.neff_cache import NeffCache
from neuronkit.policy import INPUT_FALLBACK, Policy, Rule

_CPU = torch.device("cpu")
_profiler_enabled = torch._C._autograd._profiler_enabled
_enable_record_function = torch._C._autograd._enable_record_function
_perf_ns = time.perf_counter_ns
_Tensor = torch.Tensor
# Ops that may take host tensors beside device ones, as on CUDA (copies, index tensors).
_CROSS_DEVICE_OK = frozenset({"copy_", "_copy_from", "_copy_from_and_resize", "_to_copy", "index", "index_put_",
                              "_index_put_impl_", "set_"})
# Overloads the native kernel handles by kind rather than by policy: metadata-only ops run CPU's kernel on
# the device tensor itself (views, set_); factories that only allocate get a fresh host buffer counted as
# HBM; `_copy_from*` are host<->device copies (DMA, no NEFF).
SPECIAL = {
    **dict.fromkeys(("aten::as_strided", "aten::view", "aten::view.dtype", "aten::_reshape_alias", "aten::unfold",
                     "aten::view_as_real", "aten::view_as_complex", "aten::set_.source_Storage_storage_offset",
                     "aten::set_.source_Storage", "aten::set_.source_Tensor", "aten::set_"), "redispatch"),
    "aten::empty.memory_format": "allocate", "aten::empty_strided": "allocate",
    "aten::_copy_from": "copy", "aten::_copy_from_and_resize": "copy_resize",
}


class Device:
    """State of the simulated device shared by the kernel and `torch.neuron`."""

    def __init__(self, policy: Policy, hbm: list[HbmAccount], strict: bool) -> None:
        self.policy = policy
        self.hbm = hbm  # one account per logical core, indexed by device index
        self.cache = _DeviceCache()
        self.strict = strict
        # An LRU-bounded cache reorders and evicts on every hit, so Python keeps all of it.
        native.route_to_python(native.ROUTE_BOUNDED_CACHE, bool(self.cache.max_entries or self.cache.max_bytes))


class _DeviceCache(NeffCache):
    """The device's NEFF cache: Python compiles each first-seen signature (and persists it); the native
    per-op path counts the later in-memory hits (csrc/kernel.cpp), which the statistics include."""

    def stats(self) -> dict[str, object]:
        stats = super().stats()
        stats["hits"] += native.neff_hits()
        return stats

    def clear(self) -> None:
        super().clear()
        native.neff_forget()


STATE: Device | None = None  # set by registration.install()


# ---------------------------------------------------------------------------------------------------
# Tensors: device tensors over CPU memory, and CPU aliases of device tensors.


def to_cpu(t: _Tensor) -> _Tensor:
    """A CPU tensor aliasing a neuron tensor's memory, with its lazy negation and conjugation bits (neg and
    conj views are metadata on the device: NeuronBindings.cpp VIEW_OPS_WHITELIST). Only a compiled graph's
    complex ops reach a kernel with the conjugation bit set (AOTAutograd's `_conj` then `clone` in the
    backward of a complex multiply: a complex RoPE); eager complex ops raise first."""
    alias = native.to_cpu(t)
    if t.is_conj():
        alias = torch._conj(alias)
    return torch._neg_view(alias) if t.is_neg() else alias


def _is_neuron(x: object) -> bool:
    return isinstance(x, _Tensor) and x.device.type == "neuron"


# ---------------------------------------------------------------------------------------------------
# The kernel.


@dataclass(frozen=True)
class NativeRecord:
    """What the native kernel (csrc/kernel.cpp `record_for`, its `Record`) reads of one overload, once, by
    field name: how its calls run."""

    kind: str  # kernel (the native kernel), python (every call to `slow`), or a SPECIAL kind
    native: bool  # lowered by the device: counted as executed, compiled into a NEFF
    compiles: bool  # native and not a view: one eager NEFF per signature
    cross_device: bool  # may mix host and device tensors (copies, index tensors)
    resizes: bool  # out= or resize_: the device tensor is re-pointed if the host resized it
    returns: list[tuple[int, bool] | None]  # per return: (argument it aliases, written), None when fresh
    scalars: list[int]  # argument positions where a Python number is a 0-d NEFF input, not a key part
    name: str  # the op's name as tracking records it
    random: bool  # draws from the core's default generator
    view: bool  # metadata-only: complex tensors may pass through
    call_rules: list[str]  # input-aware rules (csrc/call_rules.cpp) that stop a call


class OpKernel:
    """The Python path of one ATen overload (csrc/kernel.cpp sends calls here that need Python: errors,
    including a call an input-aware rule flags; a device generator; the device's host kernels; profiling
    and observers; a first-seen NEFF signature). Built once per overload from its schema; `describe`
    gives the native kernel its record."""

    __slots__ = ("op", "rule", "name", "overload", "returns", "resizes", "native", "compiles", "cross_device",
                 "blocked", "checks", "arg_names", "positional", "qualified", "scalars", "random", "kind",
                 "preconditions", "compiled_as")

    def __init__(self, op: torch._ops.OpOverload, policy: Policy) -> None:
        schema = op._schema
        self.name = schema.name
        self.overload = op._overloadname
        # How the real backend's boxed fallback names the op: c10::toString(operator_name), overload included.
        self.qualified = call_rules.qualified_name(op)
        # The device's own kernel where it differs from CPU's (device_ops), else CPU's.
        self.op = device_ops.HOST_IMPLS.get(schema.name, op) if self.overload == "default" else op
        self.arg_names = tuple(a.name for a in schema.arguments)
        self.positional = sum(not a.kwarg_only for a in schema.arguments)  # the rest are keyword-only
        # Where a Python number is a Scalar (the schema's type prints as `number`), one of a Scalar[] or a
        # wrapped number in a Tensor argument: a 0-d input of the NEFF, not part of its key (S
        # python_ops/processors/argument_processor.py preprocess_inputs turns each into a 0-d tensor;
        # kernels/base.py get_cache_key keys a list's numbers by type), except the static arguments S's
        # lowering of this overload keys by value (`fill_.Scalar`'s value, `addmm`'s beta and alpha, ...:
        # data/op_verdicts-torch<release>.json `static`, kernels/base.py:131-136).
        static = policy.static_scalars(self.qualified)
        self.scalars = frozenset(i for i, a in enumerate(schema.arguments)
                                 if str(a.type).removeprefix("Optional[").rstrip("]") in
                                 ("number", "Scalar", "Tensor", "List[number") and a.name not in static)
        # The overload's verdict (data/op_verdicts-torch<release>.json) under the hand-kept rules of its base name.
        self.rule: Rule = policy.rule(self.qualified)
        strict = STATE.strict
        # Raises before running: the device raises for it, or strict mode refuses every documented gap.
        self.blocked = self.rule.blocked or (strict and bool(self.rule.documented))
        # Input-aware rules (data/op_support.toml `call_rule`) that stop this call, each with its Rule; the
        # native kernel tests them on every call and comes here only when one fires.
        self.checks = tuple((fn, rule) for fn, rule in policy.call_rules(schema.name) if rule.blocked or strict)
        self.native = policy.runs_natively(self.qualified)
        # S's can_handle checks of this op (data/op_support.toml `[[precondition]]`), asked on every call.
        self.preconditions = policy.preconditions.get(self.rule.name, ()) if self.native else ()
        # How S's compile path computes such an op (no can_handle there), used inside a compiled graph.
        self.compiled_as = preconditions.COMPILED.get(self.rule.name) if self.preconditions else None
        self.compiles = self.native and not self.rule.is_view
        self.cross_device = self.rule.name in _CROSS_DEVICE_OK
        self.random = torch.Tag.nondeterministic_seeded in op.tags
        positions = {}
        for i, a in enumerate(schema.arguments):
            if a.alias_info is not None:
                for alias_set in a.alias_info.before_set:
                    positions.setdefault(alias_set, (i, a.alias_info.is_write))
        # For each return: None (fresh), or (arg position, written) of the argument it aliases.
        self.returns = tuple(positions.get(next(iter(r.alias_info.before_set)))
                             if r.alias_info and r.alias_info.before_set else None for r in schema.returns)
        self.resizes = any(a.is_out for a in schema.arguments) or self.rule.name in (
            "resize_", "resize_as_", "_copy_from_and_resize", "set_")
        host_in_python = self.op is not op and self.name not in device_ops.NATIVE_IMPLS
        self.kind = SPECIAL.get(self.qualified) or ("python" if self.blocked or host_in_python or self.preconditions
                                                    or (strict and not self.native) else "kernel")

    def describe(self) -> NativeRecord:
        """The native kernel's record of this overload (csrc/kernel.cpp `record_for`)."""
        return NativeRecord(self.kind, self.native, self.compiles, self.cross_device, self.resizes, list(self.returns),
                            sorted(self.scalars), self.name, self.random, self.rule.is_view,
                            [fn for fn, _ in self.checks])

    def __call__(self, values: list):
        """Run the op on `values`, its arguments in schema order."""
        if self.blocked:
            raise_blocked(self.name, self.rule, STATE.strict)
        if self.checks:
            call = dict(zip(self.arg_names, values))
            for fn, rule in self.checks:
                if call_rules.fires(fn, self.qualified, call):
                    raise_blocked(self.name, rule, STATE.strict)
        rejected = self._rejected(values) if self.preconditions and not compiled_graphs.in_compiled_graph else None
        profiling = _profiler_enabled()
        if profiling:
            _enable_record_function(False)
        try:
            return self._run(values, profiling, rejected)
        finally:
            if profiling:
                _enable_record_function(True)

    def _rejected(self, values: list) -> str | None:
        """Ask the op's preconditions (S's `can_handle`, neuronkit/preconditions.py) about this call: raise
        S's error, or return why no implementation takes the inputs (an input-dependent CPU fallback, or
        S's error under TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1); None when it runs natively."""
        call = {n: to_cpu(v) if _is_neuron(v) else v for n, v in zip(self.arg_names, values)}
        for precondition in self.preconditions:
            outcome = preconditions.evaluate(precondition.check, call)
            if outcome is None:
                continue
            if outcome.action == "raise":
                raise preconditions.tagged(outcome.error(outcome.message), self.name, precondition.category)
            if preconditions.fallback_only():
                raise preconditions.tagged(RuntimeError(preconditions.fallback_only_message(self.rule.name)),
                                           self.name, INPUT_FALLBACK)
            return outcome.message
        return None

    def _run(self, values: list, profiling: bool, rejected: str | None = None):
        state = STATE
        call = _HostCall(self)
        cvalues = [call.convert(v, name) for v, name in zip(values, self.arg_names)]
        if call.host is not None and call.index >= 0 and not self.cross_device:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, "
                f"neuron:{call.index} and {call.host.device}! (when checking argument for {self.name})")
        target = call.target
        if target == -1:
            target = call.index if call.index >= 0 else native.current_device()
        fallback = not self.native or rejected is not None
        if not fallback:
            native.record_op(self.name, False)
        elif rejected is not None:  # S logs the registered op as offloaded (python_ops/base.py:820-829)
            tracking.record_input_fallback(self.name, rejected)
        elif not compiled_graphs.in_compiled_graph:  # a compiled graph is lowered whole: no host fallback
            if state.strict:
                raise RuntimeError(
                    f"CPU fallback is disabled for operation={self.name}: it has no native Neuron lowering "
                    f"(NEURONKIT_STRICT=1). {self.rule.remedy}")
            if not self.rule.is_view:  # a whitelisted view runs on the host unlogged (NeuronBindings.cpp:232-246)
                native.record_op(self.qualified, True)
        key = None
        hit = False
        mechanics = None
        if self.compiles and not fallback and not compiled_graphs.in_compiled_graph:
            mechanics = native.PythonCall(self.qualified, cvalues)
            sig = mechanics.key()  # csrc/kernel.cpp `signature`, as the native path keys the call
            if sig is not None:
                key, hit = state.cache.lookup(sig)
        observers = tracking.observers
        if profiling and tracking.profiler_observers:
            observers = observers + tracking.profiler_observers
        observed = bool(observers)
        if observed:
            start = _perf_ns()
        narrow = call.wide and self.compiles and (self.random or not fallback)
        if narrow and mechanics is None:
            mechanics = native.PythonCall(self.qualified, cvalues)
        compute = (lambda: self._run_narrow(mechanics, cvalues)) if narrow else (lambda: self._invoke(cvalues))
        if self.random:
            index = target if target is not None else call.index
            result = rng.draw(compute, call.generator, index)
        else:
            result = compute()
        if observed:
            duration = _perf_ns() - start
        result = native.device_results(self.qualified, result, values, target)
        if observed:
            _notify(observers, self, start, duration, key, hit, cvalues, result, fallback)
        return result

    def _invoke(self, cvalues: list):
        n = self.positional
        op = self.compiled_as if self.compiled_as is not None and compiled_graphs.in_compiled_graph else self.op
        return op(*cvalues[:n], **dict(zip(self.arg_names[n:], cvalues[n:])))

    def _run_narrow(self, mechanics, cvalues: list):
        """Run an op with 64-bit inputs as the device does (S `python_ops/dtype_autocast.py`): csrc/kernel.cpp
        `Narrowing`, the native path's rule, narrows the arguments, writes an in-place op's results back into
        its 64-bit arguments and restores the results' types."""
        return mechanics.restored(self._invoke(mechanics.narrowed(cvalues)))


class _HostCall:
    """One call's arguments moved to the host, and what they said: the device index of the neuron tensors
    (a second index is PyTorch's cross-device error, as on CUDA; copies excepted), a host tensor among
    them, where fresh results go (`device=`), a neuron generator, a 64-bit device tensor."""

    __slots__ = ("kernel", "index", "host", "target", "generator", "wide")

    def __init__(self, kernel: OpKernel) -> None:
        self.kernel = kernel
        self.index = -1
        self.host = None
        self.target = -1  # a device index, -1 for "the arguments' device", None when `device=` is the host
        self.generator = None
        self.wide = False

    def convert(self, value, name: str):
        """`value` as the CPU kernel takes it."""
        if isinstance(value, _Tensor):
            return self.tensor(value)
        if isinstance(value, (list, tuple)) and any(isinstance(x, _Tensor) for x in value):
            return type(value)(self.tensor(x) if isinstance(x, _Tensor) else x for x in value)
        if isinstance(value, torch.device):
            if value.type != "neuron":
                self.target = None
                return value
            self.target = value.index if value.index is not None else native.current_device()
            return _CPU
        if isinstance(value, torch.Generator) and value.device.type == "neuron":
            if not self.kernel.native:
                # S's boxed CPU fallback hands the generator to the CPU kernel unchanged, whose
                # check_generator<CPUGeneratorImpl> refuses it (NeuronBindings.cpp:232-246,484; torch 2.13
                # ATen/core/Generator.h:152-156): every random op S does not lower, which is all of them.
                raise RuntimeError("Expected a 'cpu' device type for generator but found 'neuron'")
            self.generator = value
            return None
        if name == "pin_memory" and value:
            raise NotImplementedError("pin_memory is not supported for neuron tensors")
        if name == "dtype" and value in (torch.float64, torch.int64):  # a factory's 64-bit dtype is narrowed too
            self.wide = True
        return value

    def tensor(self, t: _Tensor) -> _Tensor:
        if t.device.type != "neuron":
            if t.dim() > 0:
                self.host = t
            return t
        found = t.get_device()
        kernel = self.kernel
        if self.index >= 0 and found != self.index and not kernel.cross_device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"neuron:{self.index} and neuron:{found}! (when checking argument for {kernel.name})")
        if self.index < 0:
            self.index = found
        dt = t.dtype
        if dt is torch.float64 or (dt is torch.int64 and t.numel()):  # an empty int64 has nothing to narrow
            self.wide = True
        elif dt.is_complex and kernel.native and not kernel.rule.is_view and not (
                compiled_graphs.in_compiled_graph and compiled_graphs.complex_decompose()):
            raise_complex(kernel.name, dt)  # the boxed fallback has no dtype check; a compiled graph decomposes
        return to_cpu(t)


def raise_blocked(name: str, rule: Rule, strict: bool = False) -> None:
    """A gap the device raises for (or any documented gap under NEURONKIT_STRICT=1) fails loudly, naming
    the feature and the way around it."""
    why = "" if rule.blocked or not strict else f" (documented gap, refused by NEURONKIT_STRICT=1; the device would {rule.runtime.replace('_', ' ')})"
    raise NotImplementedError(
        f"{name} is not supported on the Neuron device in this release (unsupported feature: {rule.feature})"
        f"{why} [{rule.category}]. {rule.remedy}")


def raise_complex(name: str, dtype: torch.dtype) -> None:
    """Complex tensors can be created and moved, but native ops on them fail with the device's message
    (`tests/pytorch_tests/specs/aten_spec.json`: "Complex data types are not supported on Neuron"). Ops
    without a lowering take the boxed CPU fallback, which has no dtype check (NeuronBindings.cpp:483-485)."""
    raise RuntimeError(f"{name}: Complex data types are not supported on Neuron ({dtype}) [complex_dtype]. "
                       f"{STATE.policy.complex_remedy}")


def nbytes(values) -> int:
    """The bytes of the tensors in `values`, in nested lists and tuples too (other values count 0)."""
    total = 0
    for v in values:
        if isinstance(v, _Tensor):
            total += v.numel() * v.element_size()
        elif isinstance(v, (list, tuple)):
            total += nbytes(v)
    return total


def _notify(observers: list, kernel: OpKernel, start: int, duration: int, key, hit: bool, cvalues: list,
            result, fallback: bool) -> None:
    tensors = [a for a in cvalues[:kernel.positional] if isinstance(a, _Tensor)]
    event = tracking.OpEvent(
        name=kernel.name, overload=kernel.overload, category=INPUT_FALLBACK if fallback and kernel.native else
        kernel.rule.category, fallback=fallback, start_ns=start, duration_ns=duration, cache_key=key, cache_hit=hit,
        input_shapes=tuple(tuple(t.shape) for t in tensors), input_dtypes=tuple(str(t.dtype) for t in tensors),
        bytes_in=nbytes(cvalues),
        bytes_out=nbytes(result if isinstance(result, (list, tuple)) else (result,)),
    )
    for observer in observers:
        observer(event)


_KERNELS: dict[str, OpKernel] = {}


def kernel_for(qualified: str) -> OpKernel:
    """The Python kernel of an overload by its qualified name (`aten::add.Tensor`), built once."""
    kernel = _KERNELS.get(qualified)
    if kernel is None:
        namespace, _, rest = qualified.partition("::")
        name, _, overload = rest.partition(".")
        op = getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")
        kernel = _KERNELS[qualified] = OpKernel(op, STATE.policy)
    return kernel


def describe(qualified: str) -> tuple:
    """An overload's record for the native kernel, read once per overload."""
    return kernel_for(qualified).describe()


def slow(qualified: str, values: list):
    """The Python path of one call (csrc/kernel.cpp `python_path`)."""
    return kernel_for(qualified)(values)
