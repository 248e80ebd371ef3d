"""The simulated device's tensors and its one per-op kernel.

A neuron tensor is an ordinary PrivateUse1 TensorImpl whose storage points at CPU memory (zero copy;
design/simulated-device.md, approach A2). Every ATen op that reaches the PrivateUse1 key runs here: the
kernel applies the op-support policy (native → eager NEFF cache; no lowering → silent CPU fallback,
recorded; first-release gaps → NotImplementedError), runs the op on CPU aliases of its arguments and
maps the results back onto the device according to the schema's alias annotations.
"""

from __future__ import annotations

import time

import torch
from torch._C import DispatchKey, DispatchKeySet

from neuronkit import call_rules
from neuronkit.device.simulator import compiled_graphs, device_ops, native, rng, tracking
from neuronkit.device.simulator.memory import HbmAccount
from neuronkit.device.simulator.neff_cache import NeffCache
from neuronkit.policy import Policy, Rule

CPU_KEYS = DispatchKeySet(DispatchKey.CPU)
_CPU = torch.device("cpu")
_set_storage = torch.ops.aten.set_.source_Storage_storage_offset
_as_strided = torch.ops.aten.as_strided.default
_profiler_enabled = torch._C._autograd._profiler_enabled
_enable_record_function = torch._C._autograd._enable_record_function
_perf_ns = time.perf_counter_ns
_Tensor = torch.Tensor
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
# Ops that may take host tensors beside device ones, as on CUDA (copies, index tensors).
_CROSS_DEVICE_OK = frozenset({"copy_", "_copy_from", "_copy_from_and_resize", "_to_copy", "index", "index_put_",
                              "_index_put_impl_", "set_"})


class Device:
    """State of the simulated device shared by the kernel and `torch.neuron`."""

    def __init__(self, policy: Policy, hbm: list[HbmAccount], strict: bool) -> None:
        self.policy = policy
        self.hbm = hbm  # one account per logical core, indexed by device index
        self.cache = NeffCache()
        self.strict = strict


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


class OpKernel:
    """Runs one ATen overload for the PrivateUse1 key. Built once per overload from its schema."""

    __slots__ = ("op", "rule", "name", "overload", "returns", "resizes", "native", "compiles", "cross_device",
                 "blocked", "checks", "arg_names", "qualified", "scalars", "random")

    def __init__(self, op: torch._ops.OpOverload, policy: Policy) -> None:
        schema = op._schema
        self.name = schema.name
        self.overload = op._overloadname
        # How the real backend's boxed fallback names the op: c10::toString(operator_name), overload included.
        self.qualified = self.name if self.overload == "default" else f"{self.name}.{self.overload}"
        # The device's own kernel where it differs from CPU's (device_ops), else CPU's.
        self.op = device_ops.HOST_IMPLS.get(schema.name, op) if self.overload == "default" else op
        self.arg_names = tuple(a.name for a in schema.arguments)
        # Where a Python number is a Scalar (or a wrapped number in a Tensor argument), by position and
        # name: a 0-d input of the NEFF, not part of its key.
        self.scalars = frozenset(x for i, a in enumerate(schema.arguments)
                                 if str(a.type).rstrip("?") in ("Scalar", "Tensor") for x in (i, a.name))
        self.rule: Rule = policy.rule(schema.name)
        strict = STATE.strict
        # Raises before running: the device raises for it, or strict mode refuses every documented gap.
        self.blocked = self.rule.blocked or (strict and bool(self.rule.documented))
        # Input-aware rules (data/op_support.toml `call_rule`) that stop this call, each with its Rule.
        self.checks = tuple((call_rules.RULES[fn], rule) for fn, rule in policy.call_rules(schema.name)
                            if rule.blocked or strict)
        self.native = policy.runs_natively(schema.name)
        self.compiles = self.native and not self.rule.is_view
        self.cross_device = self.rule.name in _CROSS_DEVICE_OK
        self.random = torch.Tag.nondeterministic_seeded in op.tags
        positions = {}
        for i, a in enumerate(schema.arguments):
            if a.alias_info is not None:
                for alias_set in a.alias_info.before_set:
                    positions.setdefault(alias_set, (i, a.name, a.alias_info.is_write))
        # For each return: None (fresh), or (arg position, arg name, written) of the argument it aliases.
        self.returns = []
        for r in schema.returns:
            info = r.alias_info
            self.returns.append(positions.get(next(iter(info.before_set))) if info and info.before_set else None)
        self.resizes = any(a.is_out for a in schema.arguments) or self.rule.name in (
            "resize_", "resize_as_", "_copy_from_and_resize", "set_")

    def __call__(self, *args, **kwargs):
        if self.blocked:
            raise_blocked(self.name, self.rule, STATE.strict)
        if self.checks:
            call = call_rules.bind(self.arg_names, args, kwargs)
            for applies, rule in self.checks:
                if applies(call):
                    raise_blocked(self.name, rule, STATE.strict)
        profiling = _profiler_enabled()
        if profiling:
            _enable_record_function(False)
        try:
            return self._run(args, kwargs, profiling)
        finally:
            if profiling:
                _enable_record_function(True)

    def _run(self, args: tuple, kwargs: dict, profiling: bool):
        state = STATE
        host = None  # a host tensor seen among the arguments
        cargs = []
        index = -1  # the device index of the neuron arguments
        target = -1  # where fresh results go: a device index, or None when `device=` names the host
        generator = None  # a neuron generator passed to a random op
        wide = False  # a 64-bit device tensor among the arguments: computed in 32 bit
        for a in args:
            if isinstance(a, _Tensor):
                if a.device.type == "neuron":
                    index = _device_index(a, index, self)
                    dt = a.dtype
                    if dt is torch.float64 or dt is torch.int64 or dt.is_complex:
                        wide = self._check_dtype(dt) or wide
                    a = to_cpu(a)
                elif a.dim() > 0 and a.device.type == "cpu":
                    host = a
            elif isinstance(a, (list, tuple)) and any(isinstance(x, _Tensor) for x in a):
                converted = []
                for x in a:
                    if isinstance(x, _Tensor):
                        if x.device.type == "neuron":
                            index = _device_index(x, index, self)
                            dt = x.dtype
                            if dt is torch.float64 or dt is torch.int64 or dt.is_complex:
                                wide = self._check_dtype(dt) or wide
                            x = to_cpu(x)
                        elif x.dim() > 0:
                            host = x
                    converted.append(x)
                a = type(a)(converted) if isinstance(a, tuple) else converted
            elif isinstance(a, torch.device) and a.type == "neuron":
                target = a.index if a.index is not None else native.current_device()
                a = _CPU
            elif isinstance(a, torch.Generator) and a.device.type == "neuron":
                generator, a = a, None
            cargs.append(a)
        ckwargs = kwargs
        if kwargs:
            ckwargs = {}
            for k, v in kwargs.items():
                if isinstance(v, _Tensor):
                    if v.device.type == "neuron":
                        index = _device_index(v, index, self)
                        dt = v.dtype
                        if dt is torch.float64 or dt is torch.int64 or dt.is_complex:
                            wide = self._check_dtype(dt) or wide
                        v = to_cpu(v)
                    elif v.dim() > 0:
                        host = v
                elif k == "device" and v is not None:
                    dev = v if isinstance(v, torch.device) else torch.device(v)
                    if dev.type == "neuron":
                        target = dev.index if dev.index is not None else native.current_device()
                        v = _CPU
                    else:
                        target = None
                elif isinstance(v, torch.Generator) and v.device.type == "neuron":
                    generator, v = v, None
                elif k == "pin_memory" and v:
                    raise NotImplementedError("pin_memory is not supported for neuron tensors")
                ckwargs[k] = v
        if host is not None and index >= 0 and not self.cross_device:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, neuron:{index} "
                f"and {host.device}! (when checking argument for {self.name})")
        if target == -1:
            target = index if index >= 0 else native.current_device()
        if self.native:
            tracking.executed_ops.add(self.name)
        elif not compiled_graphs.in_compiled_graph:  # a compiled graph is lowered whole: no host fallback
            if state.strict:
                raise RuntimeError(
                    f"CPU fallback is disabled for operation={self.name}: it has no native Neuron lowering "
                    f"(NEURONKIT_STRICT=1). {self.rule.remedy}")
            tracking.fallback_ops.add(self.qualified)
        key = None
        hit = False
        if self.compiles and not compiled_graphs.in_compiled_graph:
            signature = _signature(self.name, self.overload, self.scalars, cargs, ckwargs)
            if signature is not None:
                key, hit = state.cache.lookup(signature)
        observers = tracking.observers
        if profiling and tracking.profiler_observers:
            observers = observers + tracking.profiler_observers
        observed = bool(observers)
        if observed:
            start = _perf_ns()
        if self.random:
            result = rng.draw(self._compute, cargs, ckwargs, wide, generator, target if target is not None else index)
        else:
            result = self._compute(cargs, ckwargs, wide)
        if observed:
            duration = _perf_ns() - start
        result = self._results(result, args, kwargs, target)
        if observed:
            _notify(observers, self, start, duration, key, hit, cargs, ckwargs, result)
        return result

    def _compute(self, cargs: list, kwargs: dict, wide: bool):
        if wide and self.compiles:
            return self._run_narrow(cargs, kwargs)
        return self.op(*cargs, **kwargs)

    def _check_dtype(self, dtype: torch.dtype) -> bool:
        """True for a 64-bit dtype; complex raises unless the op only moves or views memory."""
        if dtype.is_complex:
            if not self.rule.is_view:
                raise_complex(self.name, dtype)
            return False
        return True

    def _run_narrow(self, cargs: list, kwargs: dict):
        """Run an op with 64-bit inputs as the device does (`python_ops/dtype_autocast.py`,
        `_process_value`): every non-0-d float64/int64 tensor argument (and every one inside a list,
        0-d included; keyword arguments too, `out` excepted) is narrowed to 32 bit before the op, and
        the outputs are restored to the 64-bit type. float64 is computed in float32. int64 values are
        wrapped to the int32 range before and after the op but kept as int64 tensors, because CPU's
        kernels insist on int64 for indices and targets (the device's kernels take int32); modular
        arithmetic makes that equal to computing in int32. An in-place op writes its result back into
        its 64-bit argument."""
        had: set = set()
        nargs = [_narrow(a, had) for a in cargs]
        nkwargs = {k: v if k == "out" else _narrow(v, had) for k, v in kwargs.items()}
        result = self.op(*nargs, **nkwargs)
        for spec in self.returns:
            if spec is not None and spec[2]:
                pos, name, _ = spec
                original, narrowed = (cargs[pos], nargs[pos]) if pos < len(cargs) else (
                    kwargs.get(name), nkwargs.get(name))
                if narrowed is not original:
                    original.copy_(_wrap_int32(narrowed) if torch.int64 in had else narrowed)
                    result = _replace(result, narrowed, original)
        if torch.float64 in had:
            result = _map_tensors(result, _widen_float)
        if torch.int64 in had:
            result = _map_tensors(result, _wrap_int32)
        return result

    def _results(self, result, args, kwargs, target: int | None):
        returns = self.returns
        if len(returns) == 1:
            return self._one(result, returns[0], args, kwargs, target)
        if not returns:
            return result
        return tuple(self._one(r, spec, args, kwargs, target) for r, spec in zip(result, returns))

    def _one(self, r, spec, args, kwargs, target: int | None):
        if spec is None:  # a fresh result, on device `target` (None: it stays on the host)
            if isinstance(r, _Tensor):
                return wrap(r, target) if target is not None else r
            if isinstance(r, list) and target is not None:
                return [wrap(x, target) if isinstance(x, _Tensor) else x for x in r]
            return r
        pos, name, written = spec
        base = args[pos] if pos < len(args) else kwargs.get(name)
        if not _is_neuron(base):
            return r
        if written:  # in-place or out=: the device tensor itself, re-pointed if the host resized it
            if self.resizes and isinstance(r, _Tensor):
                rebind(base, r)
            return base
        if isinstance(r, _Tensor):  # a view of an argument: the same view of the device tensor
            return _as_strided.redispatch(CPU_KEYS, base, r.size(), r.stride(), r.storage_offset())
        return [_as_strided.redispatch(CPU_KEYS, base, x.size(), x.stride(), x.storage_offset()) for x in r]


def _device_index(t: _Tensor, index: int, kernel: OpKernel) -> int:
    """The device index an op runs on: its first neuron argument's. Another index among the arguments is
    PyTorch's cross-device error, as on CUDA (copies excepted)."""
    found = t.get_device()
    if index < 0 or found == index or kernel.cross_device:
        return found if index < 0 else index
    raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                       f"neuron:{index} and neuron:{found}! (when checking argument for {kernel.name})")


def raise_blocked(name: str, rule: Rule, strict: bool = False) -> None:
    """A gap the device raises for (or any documented gap under NEURONKIT_STRICT=1) fails loudly, naming
    the feature and the way around it."""
    why = "" if rule.blocked or not strict else f" (documented gap, refused by NEURONKIT_STRICT=1; the device would {rule.runtime.replace('_', ' ')})"
    raise NotImplementedError(
        f"{name} is not supported on the Neuron device in this release (unsupported feature: {rule.feature})"
        f"{why} [{rule.category}]. {rule.remedy}")


def raise_complex(name: str, dtype: torch.dtype) -> None:
    """Complex tensors can be created and moved, but ops on them fail with the device's message
    (`tests/pytorch_tests/specs/aten_spec.json`: "Complex data types are not supported on Neuron")."""
    raise RuntimeError(f"{name}: Complex data types are not supported on Neuron ({dtype}) [complex_dtype]. "
                       f"{STATE.policy.complex_remedy}")


def _signature(name: str, overload: str, scalars: frozenset, cargs: list, kwargs: dict) -> tuple | None:
    """What distinguishes one compiled NEFF from another: op, tensor shapes/dtypes, static args; None
    when an input is empty (nothing to compile). Python numbers passed as Scalars (or wrapped numbers in
    Tensor arguments) become 0-d inputs in the real lowering, so their values are not part of the key;
    other ints (dims, sizes) are static."""
    parts = [name, overload]
    for i, a in enumerate(cargs):
        if isinstance(a, _Tensor) and not a.numel():
            return None
        parts.append(type(a) if i in scalars and isinstance(a, (int, float)) else _static(a))
    if kwargs:
        parts.extend((k, type(v) if k in scalars and isinstance(v, (int, float)) else _static(v))
                     for k, v in sorted(kwargs.items()))
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
    """One argument as the device computes it: 64-bit tensors narrowed (0-d ones only in lists)."""
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


def _notify(observers: list, kernel: OpKernel, start: int, duration: int, key, hit: bool, cargs, kwargs,
            result) -> None:
    tensors = [a for a in cargs if isinstance(a, _Tensor)]
    event = tracking.OpEvent(
        name=kernel.name, overload=kernel.overload, category=kernel.rule.category,
        fallback=not kernel.native, start_ns=start, duration_ns=duration, cache_key=key, cache_hit=hit,
        input_shapes=tuple(tuple(t.shape) for t in tensors), input_dtypes=tuple(str(t.dtype) for t in tensors),
        bytes_in=_nbytes(cargs) + _nbytes(kwargs.values()),
        bytes_out=_nbytes(result if isinstance(result, (list, tuple)) else (result,)),
    )
    for observer in observers:
        observer(event)


class CopyFrom:
    """`_copy_from(src, dst)` / `_copy_from_and_resize`: host<->device copies (DMA; no NEFF)."""

    __slots__ = ("resize",)

    def __init__(self, resize: bool) -> None:
        self.resize = resize

    def __call__(self, src: _Tensor, dst: _Tensor, non_blocking: bool = False) -> _Tensor:
        csrc = to_cpu(src) if _is_neuron(src) else src
        if _is_neuron(dst):
            cdst = to_cpu(dst)
            if self.resize and cdst.shape != csrc.shape:
                cdst.resize_(csrc.shape)
                rebind(dst, cdst)
            cdst.copy_(csrc)
        else:
            if self.resize:
                dst.resize_(csrc.shape)
            dst.copy_(csrc)
        return dst


class RedispatchToCpu:
    """Metadata-only ops (views, set_) run the CPU kernel directly on the device tensor: no copy."""

    __slots__ = ("op",)

    def __init__(self, op: torch._ops.OpOverload) -> None:
        self.op = op

    def __call__(self, *args, **kwargs):
        return self.op.redispatch(CPU_KEYS, *args, **kwargs)


class Allocate:
    """Factories that only allocate (`empty`, `empty_strided`): a fresh host buffer, counted as HBM."""

    __slots__ = ("op",)

    def __init__(self, op: torch._ops.OpOverload) -> None:
        self.op = op

    def __call__(self, *args, **kwargs):
        device = kwargs.get("device")
        index = device.index if device is not None and device.index is not None else native.current_device()
        kwargs["device"] = _CPU
        kwargs.pop("pin_memory", None)
        return wrap(self.op(*args, **kwargs), index)


class FailedInit:
    """Allocation when the runtime cannot initialize (a core past the count in NEURON_RT_VISIBLE_CORES):
    the first tensor on the device raises the runtime's RuntimeError, as the real backend's lazy init
    does, while `torch.neuron` stays importable."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def __call__(self, *args, **kwargs):
        raise RuntimeError(self.message)


class Fallback:
    """The boxed fallback for ops registered after install (custom libraries): one OpKernel per overload."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.kernels: dict[torch._ops.OpOverload, OpKernel] = {}

    def __call__(self, op: torch._ops.OpOverload, *args, **kwargs):
        kernel = self.kernels.get(op)
        if kernel is None:
            kernel = self.kernels[op] = OpKernel(op, self.policy)
        return kernel(*args, **kwargs)
