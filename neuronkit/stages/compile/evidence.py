"""The compile stage's records: its check steps' (torch.compile held to the CPU reference; eager against
compiled timings) and the stage's, which is the two together."""

from __future__ import annotations

from dataclasses import dataclass

from neuronkit.evidence import BucketPlan, CheckStage, ModelSlice, Parity, fact


@dataclass
class GraphBreak:
    """Where Dynamo split the model into more than one graph."""

    reason: str = fact("Reason", default="")
    where: str = fact("Where", default="")
    detail: str = fact("Dynamo's text", default="")


@dataclass
class CompileTraining:
    """One compiled forward and backward against the CPU reference's loss and gradient norm."""

    loss_cpu: float | None = fact("CPU loss")
    loss_compiled: float | None = fact("Compiled loss")
    grad_norm_cpu: float | None = fact("CPU gradient norm")
    grad_norm_compiled: float | None = fact("Compiled gradient norm")
    loss_rel_err: float | None = fact("Loss rel error", "error")
    grad_norm_rel_err: float | None = fact("Gradient norm rel error", "error")
    ok: bool = fact("Within tolerance", default=False)


@dataclass
class CompiledGraph:
    """One graph the `neuron` torch.compile backend compiled: a `torch.neuron.get_dynamo_metrics()` record
    (S: neuron_dynamo_backend/metrics.py:154-177; `kind`, `neff_key`, `neff_cache_hit` are the simulator's)."""

    graph_id: str = fact("Graph id", default="")
    graph_name: str = fact("Graph", default="")
    model_name: str = fact("Model name", default="")
    has_collectives: bool = fact("Has collectives", default=False)
    graph_node_count: int = fact("FX nodes", "count", default=0)
    timestamp: str = fact("Compiled at", doc="seconds since the epoch", default="")
    torch_neuronx_fx_passes_us: int = fact("FX passes", "µs", default=0)
    torch_neuronx_lower_us: int = fact("Lowering", "µs", default=0)
    torch_neuronx_compile_us: int = fact("NEFF compile", "µs", "0 on a NEFF cache hit", default=0)
    kind: str = fact("Kind", doc="forward or backward", default="")
    neff_key: str = fact("NEFF cache key", default="")
    neff_cache_hit: bool = fact("NEFF cache hit", default=False)
    fallback_ops: list[str] = fact("CPU fallback ops", doc="always empty: a graph is lowered whole", factory=list)


@dataclass
class CompileCheck:
    """`check` stage compile: `torch.compile(model, backend="neuron", dynamic=False)`, held to the CPU reference."""

    graphs: int | None = fact("Graphs", "count")
    graph_breaks: list[GraphBreak] = fact("Graph breaks", factory=list)
    graph_break_count: int | None = fact("Graph breaks counted by Dynamo", "count")
    recompiles: int | None = fact("Recompiles for a second input shape", "count")
    recompile_shapes: list[dict[str, list[int]]] | None = fact("Shapes compiled")
    neffs: int | None = fact("NEFFs compiled", "count")
    fallback_ops: list[str] = fact("CPU fallback ops inside compiled graphs", factory=list)
    compile_time_s: float | None = fact("First compiled call (includes compilation)", "s")
    backward_compile_time_s: float | None = fact("First backward (includes compilation)", "s")
    parity: Parity = fact("Parity against the CPU reference", factory=Parity)
    training: CompileTraining | None = fact("Compiled training step")
    buckets: BucketPlan | None = fact("Shape buckets")
    graph_metrics: list[CompiledGraph] = fact("Compiled graphs", doc="one `torch.neuron.get_dynamo_metrics()` "
                                                                     "record per graph", factory=list)
    compiled_by_caller: bool = fact("Compiled by the notebook's cell", doc="the stage reused the compiled model "
                                    "the notebook made: its first call's times and its graphs", default=False)


@dataclass
class CompileTiming:
    """`check` stage timing: eager against compiled, forward and training step (host time on the simulator)."""

    eager_step_ms: float | None = fact("Eager forward on the device (median)", "ms",
                                       "the run's one forward time: every other place reads it from here")
    compiled_step_ms: float | None = fact("Compiled forward (median)", "ms")
    speedup: float | None = fact("Forward speed-up", "×", "eager over compiled forward; on the simulated device a "
                                 "ratio of host timings, and no Trainium estimate exists (nothing models a compiled "
                                 "graph's run time on Trainium)")
    eager_train_step_ms: float | None = fact("Eager training step (median)", "ms")
    compiled_train_step_ms: float | None = fact("Compiled training step (median)", "ms")
    train_speedup: float | None = fact("Training step speed-up", "×")
    runs: int | None = fact("Timed runs", "count", "interleaved, per median")


@dataclass
class CompileEvidence(CompileTiming, CompileCheck):
    """Stage 04: the check's compile and timing records: `torch.compile(model, backend="neuron", dynamic=False)`, held
    to the CPU reference, and its timings."""

    stages: list[CheckStage] = fact("Check stages", doc="the `neuronkit check` stages it ran (cpu: the "
                                                       "reference read back; compile, timing)", factory=list)
    model_slice: ModelSlice | None = fact("Ran on", doc="the full model or a layer slice of it")
