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
from torch._C import DispatchKey, DispatchKeySet

from neuronkit import call_rules, preconditions
from neuronkit.device.simulator import compiled_graphs, device_ops, native, rng, tracking
from neuronkit.device.simulator.memory import HbmAccount
from neuronkit.device.simulator.neff_cache import NeffCache
from neuronkit.policy import INPUT_FALLBACK, Policy, Rule

CPU_KEYS = DispatchKeySet(DispatchKey.CPU)
_CPU = torch.device("cpu")
_set_storage = torch.ops.aten.set_.source_Storage_storage_offset
_as_strided = torch.ops.aten.as_strided.default
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


# wrap(cpu, index): a neuron:index tensor over the memory of a fresh CPU tensor (no copy), its bytes counted
# against that core's HBM (native runtime, csrc/allocator.cpp).
wrap = native.wrap


def to_cpu(t: _Tensor) -> _Tensor:
    """A CPU tensor aliasing a neuron tensor's memory, with its lazy negation bit (neg views are metadata
    on the device: NeuronBindings.cpp VIEW_OPS_WHITELIST)."""
    alias = native.to_cpu(t)
    return torch._neg_view(alias) if t.is_neg() else alias


def rebind(t: _Tensor, cpu: _Tensor) -> None:
    """Point neuron tensor `t` at `cpu`'s memory and metadata (after an op resized it on the host)."""
    if cpu.untyped_storage().data_ptr() != t.untyped_storage().data_ptr():
        fresh = wrap(cpu, t.get_device())
        _set_storage.redispatch(CPU_KEYS, t, fresh.untyped_storage(), cpu.storage_offset(), cpu.size(), cpu.stride())
    elif cpu.size() != t.size() or cpu.stride() != t.stride() or cpu.storage_offset() != t.storage_offset():
        _set_storage.redispatch(CPU_KEYS, t, t.untyped_storage(), cpu.storage_offset(), cpu.size(), cpu.stride())


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
                 "written", "preconditions", "compiled_as")

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
        # data/op_verdicts.json `static`, kernels/base.py:131-136).
        static = policy.static_scalars(self.qualified)
        self.scalars = frozenset(i for i, a in enumerate(schema.arguments)
                                 if str(a.type).removeprefix("Optional[").rstrip("]") in
                                 ("number", "Scalar", "Tensor", "List[number") and a.name not in static)
        # The overload's verdict (data/op_verdicts.json) under the hand-kept rules of its base name.
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
        # Arguments the op writes (in-place), `out` excepted: 64-bit narrowing writes their results back.
        self.written = tuple(i for i, a in enumerate(schema.arguments)
                             if a.alias_info is not None and a.alias_info.is_write and a.name != "out")
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
        if self.compiles and not fallback and not compiled_graphs.in_compiled_graph:
            sig = signature(self, cvalues)
            if sig is not None:
                key, hit = state.cache.lookup(sig)
        observers = tracking.observers
        if profiling and tracking.profiler_observers:
            observers = observers + tracking.profiler_observers
        observed = bool(observers)
        if observed:
            start = _perf_ns()
        if self.random:
            index = target if target is not None else call.index
            result = rng.draw(lambda: self._compute(cvalues, call.wide), call.generator, index)
        elif fallback:  # the host runs the op at its own width
            result = self._invoke(cvalues)
        else:
            result = self._compute(cvalues, call.wide)
        if observed:
            duration = _perf_ns() - start
        result = self._results(result, values, target)
        if observed:
            _notify(observers, self, start, duration, key, hit, cvalues, result, fallback)
        return result

    def _invoke(self, cvalues: list):
        n = self.positional
        op = self.compiled_as if self.compiled_as is not None and compiled_graphs.in_compiled_graph else self.op
        return op(*cvalues[:n], **dict(zip(self.arg_names[n:], cvalues[n:])))

    def _compute(self, cvalues: list, wide: bool):
        if wide and self.compiles:
            return self._run_narrow(cvalues)
        return self._invoke(cvalues)

    def _run_narrow(self, cvalues: list):
        """Run an op with 64-bit inputs as the device does (`python_ops/dtype_autocast.py`,
        `_process_value`): every non-0-d float64/int64 tensor argument (and every one inside a list,
        0-d included; `out` excepted) is narrowed to 32 bit before the op, and the outputs are restored
        to the 64-bit type. float64 is computed in float32. int64 values are wrapped to the int32 range
        before and after the op but kept as int64 tensors, because CPU's kernels insist on int64 for
        indices and targets (the device's kernels take int32); modular arithmetic makes that equal to
        computing in int32. An in-place op writes its result back into its 64-bit argument (each tensor of
        a written list too). csrc/kernel.cpp `Narrowing` is the same rule for the calls it runs."""
        had: set = set()
        narrowed = [v if name == "out" else _narrow(v, had) for v, name in zip(cvalues, self.arg_names)]
        result = self._invoke(narrowed)
        for pos in self.written:
            original, narrow = cvalues[pos], narrowed[pos]
            if narrow is not original:
                pairs = zip(original, narrow) if isinstance(original, (list, tuple)) else ((original, narrow),)
                for dst, src in pairs:
                    if isinstance(dst, _Tensor) and src is not dst:
                        dst.copy_(_wrap_int32(src))
                result = _replace(result, narrow, original)
        if torch.float64 in had:
            result = _map_tensors(result, _widen_float)
        if torch.int64 in had:
            result = _map_tensors(result, _wrap_int32)
        if "dtype" in had:  # computed at the narrowed dtype, returned at the one asked for (restore_dtypes)
            result = _map_tensors(result, _widen_int)
        return result

    def _results(self, result, values: list, target: int | None):
        returns = self.returns
        if len(returns) == 1:
            return self._one(result, returns[0], values, target)
        if not returns:
            return result
        return tuple(self._one(r, spec, values, target) for r, spec in zip(result, returns))

    def _one(self, r, spec, values: list, target: int | None):
        if spec is None:  # a fresh result, on device `target` (None: it stays on the host)
            if isinstance(r, _Tensor):
                return wrap(r, target) if target is not None else r
            if isinstance(r, list) and target is not None:
                return [wrap(x, target) if isinstance(x, _Tensor) else x for x in r]
            return r
        pos, written = spec
        base = values[pos]
        if not _is_neuron(base):
            return r
        if written:  # in-place or out=: the device tensor itself, re-pointed if the host resized it
            if self.resizes and isinstance(r, _Tensor):
                rebind(base, r)
            return base
        if isinstance(r, _Tensor):  # a view of an argument: the same view of the device tensor
            return _as_strided.redispatch(CPU_KEYS, base, r.size(), r.stride(), r.storage_offset())
        return [_as_strided.redispatch(CPU_KEYS, base, x.size(), x.stride(), x.storage_offset()) for x in r]


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
        elif dt.is_complex and kernel.native and not kernel.rule.is_view:  # the boxed fallback has no dtype check
            raise_complex(kernel.name, dt)
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


def signature(kernel: OpKernel, cvalues: list) -> tuple | None:
    """What distinguishes one compiled NEFF from another: op, tensor shapes/dtypes, static args; None
    when a positional tensor is empty (nothing to compile). Python numbers passed as Scalars (or wrapped
    numbers in Tensor arguments) become 0-d inputs in the real lowering, so their values are not part of
    the key; other ints (dims, sizes) are static. csrc/kernel.cpp `signature` keys the same parts."""
    parts = [kernel.name, kernel.overload]
    scalars = kernel.scalars
    for i, a in enumerate(cvalues):
        if i < kernel.positional and isinstance(a, _Tensor) and not a.numel():
            return None
        if i in scalars and isinstance(a, (int, float)):
            parts.append(type(a))
        elif i in scalars and isinstance(a, (list, tuple)):
            parts.append(tuple(type(x) if isinstance(x, (int, float)) else _static(x) for x in a))
        else:
            parts.append(_static(a))
    return tuple(parts)


def _static(a):
    if isinstance(a, _Tensor):
        return tuple(a.shape), a.dtype
    if isinstance(a, (list, tuple)):
        return tuple(_static(x) for x in a)
    return a


def _map_tensors(result, fn):
    if isinstance(result, _Tensor):
        return fn(result)
    if isinstance(result, (list, tuple)):
        return type(result)(_map_tensors(r, fn) for r in result)
    return result


def _narrow_tensor(t: _Tensor) -> _Tensor:
    """float64 → float32; int64 → its value wrapped to the int32 range, still int64 (see _run_narrow)."""
    if t.dtype is torch.float64:
        return t.float()
    return t.to(torch.int32).to(torch.int64)


def _narrow(value, had: set):
    """One argument as the device computes it: 64-bit tensors narrowed (0-d ones only in lists), and a 64-bit
    `dtype` argument (S: python_ops/torch_mlir/op_impl.py:89-95 runs every torch-mlir op under
    autocast_neuron(cast_dtype_params=True), dtype_autocast.py:71-78: float64 -> float32, int64 -> int32)."""
    if value is torch.float64 or value is torch.int64:
        had.add(value)
        if value is torch.int64:
            had.add("dtype")
        return torch.float32 if value is torch.float64 else torch.int32
    if isinstance(value, _Tensor):
        dt = value.dtype
        if value.dim() and (dt is torch.float64 or dt is torch.int64):
            had.add(dt)
            return _narrow_tensor(value)
        return value
    if isinstance(value, (list, tuple)) and any(isinstance(v, _Tensor) for v in value):
        out = []
        for v in value:
            if isinstance(v, _Tensor) and (v.dtype is torch.float64 or v.dtype is torch.int64):
                had.add(v.dtype)
                v = _narrow_tensor(v)
            out.append(v)
        return type(value)(out)
    return value


def _replace(result, old: _Tensor, new: _Tensor):
    if result is old:
        return new
    if isinstance(result, (list, tuple)):
        return type(result)(_replace(r, old, new) for r in result)
    return result


def _widen_float(t: _Tensor) -> _Tensor:
    return t.double() if t.dtype is torch.float32 else t


def _widen_int(t: _Tensor) -> _Tensor:
    return t.to(torch.int64) if t.dtype is torch.int32 else t


def _wrap_int32(t: _Tensor) -> _Tensor:
    return t.to(torch.int32).to(torch.int64) if t.dtype is torch.int64 and t.numel() else t


def _nbytes(values) -> int:
    total = 0
    for v in values:
        if isinstance(v, _Tensor):
            total += v.numel() * v.element_size()
        elif isinstance(v, (list, tuple)):
            total += _nbytes(v)
    return total


def _notify(observers: list, kernel: OpKernel, start: int, duration: int, key, hit: bool, cvalues: list,
            result, fallback: bool) -> None:
    tensors = [a for a in cvalues[:kernel.positional] if isinstance(a, _Tensor)]
    event = tracking.OpEvent(
        name=kernel.name, overload=kernel.overload, category=INPUT_FALLBACK if fallback and kernel.native else
        kernel.rule.category, fallback=fallback, start_ns=start, duration_ns=duration, cache_key=key, cache_hit=hit,
        input_shapes=tuple(tuple(t.shape) for t in tensors), input_dtypes=tuple(str(t.dtype) for t in tensors),
        bytes_in=_nbytes(cvalues),
        bytes_out=_nbytes(result if isinstance(result, (list, tuple)) else (result,)),
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
