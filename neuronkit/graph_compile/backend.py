"""The `neuron` torch.compile backend, as TorchNeuron ships it, over the simulated device.

Behaviour doc §3 and design/simulated-device.md §D: TorchDynamo captures a graph, AOTAutograd splits it
into a forward and a backward graph, and each is lowered whole through torch-mlir into one NEFF
(cached). There is no per-op host fallback inside a graph (S: examples/torch_compile/README.md:40,
"95% of ATen ops"); what the lowering cannot take fails as a lowering error: higher-order ops such as
`cond`, `map`, `invoke_subgraph` ("Higher-order operation '<op>' not implemented in the FxImporter";
FlexAttention's op is legalized into ATen ops instead, as S's pass does: flex_attention.py),
a graph with no outputs (S: neuron_dynamo_backend/fx/fx_transform.py:240-245), and ops the device
raises for. Here a "compilation" checks the graph for those, counts it as one entry in the device's
NEFF cache, appends a `NeuronCompilationMetrics` record (S: neuron_dynamo_backend/metrics.py:154) and
returns the graph, which then runs eagerly through the device kernel with per-op NEFF accounting and
fallback tracking off.

Shapes (NEURONKIT_COMPILE_SHAPES), per the release modelled: `recompile` (default: the public beta this
policy describes, whose docs say each new shape recompiles) specialises a graph Dynamo made dynamic on
its own to each concrete shape, one NEFF per shape; `source` (S @ 98154b8) leaves it symbolic, so a
second input shape without `dynamic=False` is rejected (S: examples/compile/QUICKSTART.md, "Dynamic
shapes"). Neither changes Dynamo's process-wide configuration. `dynamic=True` is rejected in both.
Also reproduced: a non-default `mode` warned about and ignored, `options={"model_name": ...,
"fallback_execution": ...}`, and TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION (default True: a compile
failure raises; 0: the original GraphModule runs eagerly instead).
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch._subclasses.fake_tensor import is_fake
from torch.fx.experimental.symbolic_shapes import is_concrete_int
from torch.utils._python_dispatch import TorchDispatchMode

from neuronkit.device.simulator import compiled_graphs, kernel
from neuronkit import env
from neuronkit.graph_compile import flex_attention
from neuronkit.policy import Policy, load_policy

log = logging.getLogger(__name__)

BACKEND_NAME = "neuron"
FALLBACK_ENV = "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"
DEFAULT_MODEL_NAME = "model"
SHAPES_ENV = "NEURONKIT_COMPILE_SHAPES"
SHAPE_MODES = ("recompile", "source")
_graph_ids = itertools.count()
# Higher-order ops torch-mlir's FxImporter has no importer for (S: tests/pytorch_tests/specs/dynamo_spec.json).
_UNLOWERED_HOPS = frozenset({"cond", "map_impl", "invoke_subgraph", "while_loop", "while_loop_stack_output",
                             "scan", "auto_functionalized_v2", "invoke_quant_packed", "run_and_save_rng_state",
                             "associative_scan"})


@dataclass
class NeuronCompilationMetrics:
    """One compiled graph, with S's fields (neuron_dynamo_backend/metrics.py:154-177) and per-phase
    timings in microseconds; `kind`, `neff_key` and `neff_cache_hit` are the simulator's additions.
    Item access (`record["graph_name"]`) reads the same fields."""

    graph_id: str
    graph_name: str = ""
    model_name: str = ""
    has_collectives: bool = False
    graph_node_count: int = 0
    timestamp: str = ""
    torch_neuronx_fx_passes_us: int = 0
    torch_neuronx_lower_us: int = 0
    torch_neuronx_compile_us: int = 0
    kind: str = "forward"
    neff_key: str = ""
    neff_cache_hit: bool = False
    fallback_ops: list[str] = field(default_factory=list)  # always empty: a graph is lowered whole

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    @property
    def compile_time_us(self) -> int:
        """All phases together."""
        return self.torch_neuronx_fx_passes_us + self.torch_neuronx_lower_us + self.torch_neuronx_compile_us


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
    try:
        flex_attention.legalize(gm)  # S legalizes FlexAttention rather than refusing it (flex_attention.py)
        _check_lowerable(gm)
        dims = _dynamic_dims(gm, example_inputs)
        if dims and (settings.shapes == "source" or _explicitly_dynamic(gm)):
            _reject_dynamic_shapes(dims)
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


@dataclass(slots=True)
class _Settings:
    """What one torch.compile call asked for: the model name and whether failures fall back to eager."""

    model_name: str
    fallback_execution: bool
    shapes: str

    @classmethod
    def parse(cls, mode: str | None, options: dict[str, Any] | None) -> "_Settings":
        if mode not in (None, "default"):
            log.warning("Neuron backend does not support mode='%s', falling back to default mode.", mode)
        options = dict(options or {})
        disabled = env.flag(FALLBACK_ENV, True, false=env.FALSE_WORDS)
        fallback = options.pop("fallback_execution", not disabled)
        shapes = env.word(SHAPES_ENV, "recompile")
        if shapes not in SHAPE_MODES:
            raise ValueError(f"{SHAPES_ENV}={shapes!r}: expected one of {', '.join(SHAPE_MODES)}")
        return cls(str(options.pop("model_name", DEFAULT_MODEL_NAME)), bool(fallback), shapes)


def _check_lowerable(gm: torch.fx.GraphModule) -> None:
    """What torch-mlir cannot lower fails the compilation, naming the op (S: dynamo_spec.json)."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator):
            name = node.target.name()
            if name in _UNLOWERED_HOPS:
                raise NEFFCompilationError(
                    f"Neuron backend NEFF execution setup failed: Higher-order operation '{name}' not implemented "
                    f"in the FxImporter (tried '_import_hop_{name}'). Rewrite the control flow with torch.where "
                    "or unroll it, or run this part eagerly (torch.compiler.disable).")
    output = next(iter(gm.graph.find_nodes(op="output")), None)
    if output is None or not any(isinstance(n, torch.fx.Node) for n in _flatten(output.args)):
        raise NEFFCompilationError(
            "Neuron backend NEFF execution setup failed: No outputs found in the module, expected at least one "
            "output, modify your code to have at least one output.")


def _flatten(value: Any) -> list:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flatten(v)]
    return [value]


def _explicitly_dynamic(gm: torch.fx.GraphModule) -> bool:
    """`dynamic=True` (Dynamo assumes dynamic sizes while compiling that frame) or `mark_dynamic` on an
    input, as opposed to dimensions Dynamo made dynamic on its own after a second shape."""
    if not torch._dynamo.config.assume_static_by_default:
        return True
    return any(getattr(getattr(node.meta.get("grapharg"), "example", None), "_dynamo_dynamic_indices", None)
               for node in gm.graph.find_nodes(op="placeholder"))


def _dynamic_dims(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list[str]:
    """The graph's symbolic input sizes as the error names them (`x dim 0 (s0)`, `size s1`); empty when static."""
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
    return dims


def _reject_dynamic_shapes(dims: list[str]) -> None:
    """Symbolic sizes (`dynamic=True`, `mark_dynamic`, or a second shape under Dynamo's automatic
    dynamic shapes) cannot be compiled into a NEFF (§3; S: examples/compile/QUICKSTART.md)."""
    raise RuntimeError(
        f"Dynamic shapes detected in the model, but torch-neuronx requires static shapes. Found "
        f"{len(dims)} dynamic dimension(s): [{', '.join(dims)}]. Fix: compile with "
        "torch.compile(..., dynamic=False) and do not mark dimensions dynamic; pad inputs to a few fixed "
        "bucket lengths (neuronkit.graph_compile.suggest_buckets) so each bucket compiles once.")


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
    rule = policy.rule(op.name())  # the overload's verdict under its base name's hand-kept rules
    if rule.blocked:
        raise NEFFCompilationError(
            f"{op._schema.name}.{op._overloadname} cannot be compiled for the Neuron device in this release "
            f"(unsupported feature: {rule.feature}) [{rule.category}]. {rule.remedy}")


class _GraphCompiler:
    """The forward and backward compilers AOTAutograd calls for one Dynamo graph."""

    def __init__(self, settings: _Settings) -> None:
        self.settings = settings

    def forward(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
        return self._compile(gm, example_inputs, "forward")

    def backward(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
        return self._compile(gm, example_inputs, "backward")

    def _compile(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], kind: str) -> Callable:
        try:
            start = time.perf_counter_ns()
            policy = load_policy()
            for node in gm.graph.nodes:
                if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                    _check_op(node.target, policy)
            passes_us = (time.perf_counter_ns() - start) // 1000
            if _dynamic_dims(gm, example_inputs):  # `recompile` mode: one NEFF per concrete shape
                return make_boxed_func(_PerShape(self, gm, kind, passes_us))
            self._record(gm, kind, _graph_signature(gm, kind), passes_us, start)
            return make_boxed_func(_run_as_one_neff(gm))
        except Exception as exc:
            if not self.settings.fallback_execution:
                raise
            _log_fallback(exc)
            return make_boxed_func(gm.forward)

    def _record(self, gm: torch.fx.GraphModule, kind: str, signature: tuple, passes_us: int, start: int) -> None:
        """Count the graph as one NEFF and record its metrics."""
        lower_start = time.perf_counter_ns()
        key, hit = kernel.STATE.cache.lookup(signature)
        graph_id = next(_graph_ids)
        compiled_graphs.METRICS.append(NeuronCompilationMetrics(
            graph_id=str(key), graph_name=f"{self.settings.model_name}_{kind}_{graph_id}",
            model_name=self.settings.model_name,
            has_collectives=any(n.op == "call_function" and getattr(n.target, "namespace", "") in
                                ("_c10d_functional", "c10d") for n in gm.graph.nodes),
            graph_node_count=len(gm.graph.nodes), timestamp=f"{time.time():.6f}",
            torch_neuronx_fx_passes_us=max(passes_us, 1),
            torch_neuronx_lower_us=max((time.perf_counter_ns() - lower_start) // 1000, 1),
            torch_neuronx_compile_us=0 if hit else max((time.perf_counter_ns() - start) // 1000, 1),
            kind=kind, neff_key=str(key), neff_cache_hit=hit))


class _PerShape:
    """A graph Dynamo made dynamic on its own, run as the Oct docs describe: each new concrete input
    shape compiles (and is recorded as) one NEFF."""

    def __init__(self, compiler: _GraphCompiler, gm: torch.fx.GraphModule, kind: str, passes_us: int) -> None:
        self.compiler, self.gm, self.kind, self.passes_us = compiler, gm, kind, passes_us
        self.run = _run_as_one_neff(gm)
        self.seen: set[tuple] = set()

    def __call__(self, *args: Any) -> Any:
        shapes = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)
        if shapes not in self.seen:
            self.seen.add(shapes)
            self.compiler._record(self.gm, self.kind, ("graph", self.kind, self.gm.code, shapes), self.passes_us,
                                  time.perf_counter_ns())
        return self.run(*args)


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
        with compiled_graphs.running():
            return forward(*args)

    return run


def _log_fallback(exc: BaseException) -> None:
    log.warning("Neuron compilation failed: %s: %s", type(exc).__name__, exc)
    log.warning("Falling back to original GraphModule execution")
