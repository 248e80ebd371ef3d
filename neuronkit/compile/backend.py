"""The `neuron` torch.compile backend, as TorchNeuron ships it, over the simulated device.

Behaviour doc §3 and design/simulated-device.md §D: TorchDynamo captures a graph, AOTAutograd splits it
into a forward and a backward graph, and each is compiled on its own into one NEFF (cached). Here a
"compilation" checks the graph against the one op policy (`neuronkit.policy`), records the ops that
would run on the host, counts the graph as one entry in the device's NEFF cache, appends a record to
`torch.neuron.get_dynamo_metrics()` and returns the graph, which then runs eagerly through the device
kernel with per-op NEFF accounting off. Reproduced switches: `dynamic=True` / symbolic shapes rejected
("Dynamic shapes detected ..."), automatic dynamic shapes off (a new shape recompiles), a non-default
`mode` warned about and ignored, `options={"model_name": ..., "fallback_execution": ...}`, and
TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION (default True: a compile failure raises; 0: the original
GraphModule runs eagerly instead).
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from typing import Any, Callable, Sequence

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch._subclasses.fake_tensor import is_fake
from torch.fx.experimental.symbolic_shapes import is_concrete_int
from torch.utils._python_dispatch import TorchDispatchMode

from neuronkit.device.simulator import compiled_graphs, kernel
from neuronkit.policy import Policy, load_policy

log = logging.getLogger(__name__)

BACKEND_NAME = "neuron"
FALLBACK_ENV = "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"
DEFAULT_MODEL_NAME = "model"
_FALSE = ("0", "false", "no", "off")
_graph_ids = itertools.count()


class NEFFCompilationError(RuntimeError):
    """A graph the Neuron compiler cannot turn into a NEFF (torch_neuronx exports the same name, §3)."""


def neuron_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *, mode: str | None = None,
                   options: dict[str, Any] | None = None) -> Callable:
    """Compile one TorchDynamo graph for the `neuron` device (`torch.compile(m, backend="neuron")`).

    A failure raises (Dynamo reports it as `BackendCompilerFailed`) unless fallback execution is on,
    in which case the original graph runs eagerly."""
    if kernel.STATE is None:
        raise RuntimeError("the neuron backend needs the neuron device, and the simulator is not installed in "
                           "this process (TORCH_DEVICE_BACKEND_AUTOLOAD=0 or NEURONKIT_SIMULATOR=0?)")
    settings = _Settings.parse(mode, options)
    _force_static_shapes()
    try:
        _reject_dynamic_shapes(gm, example_inputs)
        _check_source_ops(gm, example_inputs, load_policy())
        compiler = _GraphCompiler(settings)
        return aot_autograd(fw_compiler=compiler.forward, bw_compiler=compiler.backward)(gm, example_inputs)
    except Exception as exc:
        if not settings.fallback_execution:
            raise
        _log_fallback(exc)
        return gm.forward


def register() -> None:
    """Make `backend="neuron"` resolvable without the package's entry point (e.g. from a source tree).

    Skipped when Dynamo already knows the name: through the `torch_dynamo_backends` entry point it
    loads this module itself, and registering twice is an error in Dynamo's registry."""
    from torch._dynamo.backends import registry

    if BACKEND_NAME not in registry._BACKENDS and BACKEND_NAME not in registry._COMPILER_FNS:
        registry.register_backend(neuron_backend, name=BACKEND_NAME)


class _Settings:
    """What one torch.compile call asked for: the model name and whether failures fall back to eager."""

    __slots__ = ("model_name", "fallback_execution")

    def __init__(self, model_name: str, fallback_execution: bool) -> None:
        self.model_name = model_name
        self.fallback_execution = fallback_execution

    @classmethod
    def parse(cls, mode: str | None, options: dict[str, Any] | None) -> "_Settings":
        if mode not in (None, "default"):
            log.warning("Neuron backend does not support mode='%s', falling back to default mode.", mode)
        options = dict(options or {})
        disabled = os.environ.get(FALLBACK_ENV, "1").strip().lower() not in _FALSE
        fallback = options.pop("fallback_execution", not disabled)
        return cls(str(options.pop("model_name", DEFAULT_MODEL_NAME)), bool(fallback))


def _force_static_shapes() -> None:
    """The Neuron backend forces `dynamic=False` (§3): a new input shape recompiles, it never turns into
    a symbolic dimension. Dynamo's automatic dynamic shapes are switched off for the process once the
    backend is used; an explicit `dynamic=True` still reaches `_reject_dynamic_shapes`."""
    config = torch._dynamo.config
    if config.automatic_dynamic_shapes:
        config.automatic_dynamic_shapes = False
        log.info("neuron backend: automatic dynamic shapes disabled (static shapes, one compilation per shape)")


def _reject_dynamic_shapes(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> None:
    """Symbolic sizes (`dynamic=True`, `mark_dynamic`) cannot be compiled into a NEFF (§3)."""
    dims: list[str] = []
    symbols: list[str] = []
    for node, example in zip(gm.graph.find_nodes(op="placeholder"), example_inputs):
        value = node.meta.get("example_value", example)
        if isinstance(value, torch.SymInt) and not is_concrete_int(value):
            symbols.append(str(value))
        elif isinstance(value, torch.Tensor):
            dims.extend(f"{node.name} dim {i} ({size})" for i, size in enumerate(value.shape)
                        if not is_concrete_int(size))
    described = " ".join(dims)
    dims.extend(f"size {s}" for s in symbols if f"({s})" not in described)
    if dims:
        raise RuntimeError(
            f"Dynamic shapes detected in the model, but torch-neuronx requires static shapes. Found "
            f"{len(dims)} dynamic dimension(s): [{', '.join(dims)}]. Fix: compile with "
            "torch.compile(..., dynamic=False) and do not mark dimensions dynamic; pad inputs to a few fixed "
            "bucket lengths (neuronkit.compile.suggest_buckets) so each bucket compiles once.")


class _RecordOps(TorchDispatchMode):
    """The ATen overloads a graph dispatches, before AOTAutograd's Python decompositions hide them.
    Higher-order ops (an NKI kernel's `nki_kernel_wrapper`) pass through unrecorded: they are not ATen ops."""

    supports_higher_order_operators = True

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[torch._ops.OpOverload] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if isinstance(func, torch._ops.OpOverload):
            self.ops.add(func)
        return func(*args, **(kwargs or {}))


def _check_source_ops(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], policy: Policy) -> None:
    """Run the Dynamo graph on its fake inputs and apply the policy to the ops eager mode would see.

    AOTAutograd decomposes some blocked ops (e.g. `upsample_bilinear2d` into index arithmetic), so the
    check on the compiled graphs alone would accept what eager mode refuses."""
    fake_mode = torch._guards.detect_fake_mode(example_inputs)
    if fake_mode is None:
        return
    with fake_mode, torch.no_grad():
        inputs = [_fake_copy(x, fake_mode) if isinstance(x, torch.Tensor) else x for x in example_inputs]
        with _RecordOps() as recorder:
            gm(*inputs)
    for op in sorted(recorder.ops, key=str):
        _check_op(op, policy)


def _fake_copy(x: torch.Tensor, fake_mode: Any) -> torch.Tensor:
    """A private fake copy (Dynamo passes parameters as real tensors), so in-place ops stay local."""
    fake = x if is_fake(x) else fake_mode.from_tensor(x)
    return fake.detach().clone()


def _check_op(op: torch._ops.OpOverload, policy: Policy) -> None:
    rule = policy.rule(op._schema.name)
    if rule.blocked:
        raise NEFFCompilationError(
            f"{op._schema.name}.{op._overloadname} cannot be compiled for the Neuron device in this release "
            f"(unsupported feature: {rule.feature}) [{rule.category}]. {rule.remedy}")


class _GraphCompiler:
    """The forward and backward compilers AOTAutograd calls for one Dynamo graph."""

    def __init__(self, settings: _Settings) -> None:
        self.settings = settings

    def forward(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
        return self._compile(gm, "forward")

    def backward(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
        return self._compile(gm, "backward")

    def _compile(self, gm: torch.fx.GraphModule, kind: str) -> Callable:
        try:
            return make_boxed_func(_run_as_one_neff(self._neff(gm, kind)))
        except Exception as exc:
            if not self.settings.fallback_execution:
                raise
            _log_fallback(exc)
            return make_boxed_func(gm.forward)

    def _neff(self, gm: torch.fx.GraphModule, kind: str) -> torch.fx.GraphModule:
        """Check the graph, count it as one NEFF and record its metrics."""
        start = time.perf_counter_ns()
        policy = load_policy()
        ops = [n.target for n in gm.graph.nodes
               if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)]
        for op in ops:
            _check_op(op, policy)
        fallbacks = sorted({op._schema.name for op in ops if _runs_on_host(op, policy)})
        key, hit = kernel.STATE.cache.lookup(_graph_signature(gm, kind))
        graph_id = next(_graph_ids)
        name = f"{self.settings.model_name}_{kind}_{graph_id}"
        if fallbacks:
            log.warning("graph %s: %d op(s) have no native Neuron lowering and run on the host: %s",
                        name, len(fallbacks), ", ".join(fallbacks))
        compiled_graphs.METRICS.append({
            "graph_id": graph_id,
            "graph_name": name,
            "model_name": self.settings.model_name,
            "kind": kind,
            "has_collectives": any(op.namespace in ("_c10d_functional", "c10d") for op in ops),
            "graph_node_count": len(gm.graph.nodes),
            "fallback_ops": fallbacks,
            "neff_key": key,
            "neff_cache_hit": hit,
            "timestamp": time.time(),
            "compile_time_us": (time.perf_counter_ns() - start) / 1e3,
        })
        return gm


def _runs_on_host(op: torch._ops.OpOverload, policy: Policy) -> bool:
    """An op the device computes itself (it has a device kernel) but has no native lowering for."""
    qualified = f"{op._schema.name}.{op._overloadname}" if op._overloadname != "default" else op._schema.name
    return (op.namespace == "aten" and not policy.runs_natively(op._schema.name)
            and torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1"))


def _graph_signature(gm: torch.fx.GraphModule, kind: str) -> tuple:
    """What makes two compiled graphs the same NEFF: the graph's code and its input shapes/dtypes."""
    inputs = []
    for node in gm.graph.find_nodes(op="placeholder"):
        value = node.meta.get("val")
        inputs.append((tuple(value.shape), value.dtype) if isinstance(value, torch.Tensor) else repr(value))
    return ("graph", kind, gm.code, tuple(inputs))


def _run_as_one_neff(gm: torch.fx.GraphModule) -> Callable:
    """The graph's forward with `compiled_graphs.in_compiled_graph` set, so the device kernel does not
    count each of its ops as an eager NEFF."""
    forward = gm.forward

    def run(*args: Any) -> Any:
        outer = compiled_graphs.in_compiled_graph
        compiled_graphs.in_compiled_graph = True
        try:
            return forward(*args)
        finally:
            compiled_graphs.in_compiled_graph = outer

    return run


def _log_fallback(exc: BaseException) -> None:
    log.warning("Neuron compilation failed: %s: %s", type(exc).__name__, exc)
    log.warning("Falling back to original GraphModule execution")
