"""The compile stage's `neuronkit check` steps: `compile` (`torch.compile(model, backend="neuron",
dynamic=False)` held to the CPU reference, with shape-bucket advice) and `timing` (eager against compiled,
forward and training step: host time on the simulator)."""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Callable

import torch
from torch._dynamo.exc import TorchDynamoException

from neuronkit import inputs as example, timing
from neuronkit.calling import call, same_draws
from neuronkit.graph_compile import compare
from neuronkit.graph_compile.backend import neuron_backend
from neuronkit.graph_compile.buckets import advise_buckets
from neuronkit.pipeline.check import CheckRun, parity, top1_note, worst_error
from neuronkit.pipeline.record import first_line
from neuronkit.pipeline.session import Session
from neuronkit.stages.compile import CompileOptions
from neuronkit.stages.compile.evidence import CompileCheck, CompiledGraph, CompileTiming, CompileTraining, GraphBreak
from neuronkit.timing import interleaved_medians, timed
from neuronkit.units import format_duration, format_ms

RECOMPILE_LIMIT = 64  # the check compiles several shapes and grad modes of one model


def run_compile(run: CheckRun, record: CompileCheck) -> tuple[str, str]:
    """`torch.compile(model, backend="neuron", dynamic=False)` trained one step and held to the CPU reference:
    graphs, breaks, recompiles for a second input shape, NEFFs, fallbacks inside graphs (Dynamo reset first:
    this model's alone, unless the caller's compiled model serves); and bucket advice."""
    from torch._dynamo.backends.debugging import ExplainWithBackend

    s, options = run.session, run.config.of(CompileOptions)
    prompts = options.prompts_file or s.prompts_file  # a prompts file given as the inputs sizes the buckets too
    record.buckets = advise_buckets(s.tokenizer, s.hf_config, prompts, options.max_buckets)
    model, _ = run.neuron()
    inputs = run.neuron_inputs
    given = s.compiled
    reuse = given is not None and _graphs_reusable(s)
    explain: Any = None
    if given is not None and reuse:  # the caller's compiled model: its graphs serve the calls below
        compiled, count_graphs = given.module, _forward_graph_count
    else:
        torch._dynamo.reset()
        explain = ExplainWithBackend(functools.partial(neuron_backend, options={"model_name": s.name}))
        # dynamic=False: the form S's compile quickstart recommends (examples/compile/QUICKSTART.md, "Dynamic
        # shapes") and notebook 04 teaches; each input shape then compiles its own static graph, which is what
        # the recompile probe counts, without Dynamo's symbolic retrace of the second shape
        compiled = torch.compile(model, backend=explain, recompile_limit=RECOMPILE_LIMIT, dynamic=False)
        count_graphs = explain.graphs.__len__
    first_metric, graphs_before = len(torch.neuron.get_dynamo_metrics()), count_graphs()
    breaks_before = _graph_break_total()
    # The compiled graphs are built for training (forward + backward), and held to the CPU reference.
    model.zero_grad(set_to_none=True)
    try:
        with s.device_mode(), same_draws():
            out, record.compile_time_s = timed(lambda: call(compiled, inputs, **s.extra))
        loss = compare.loss_of(out)
        _, record.backward_compile_time_s = timed(loss.backward)
    except Exception:
        on_cpu = _cpu_compile_error(s, model.training)
        if on_cpu is None:
            raise
        return "skipped", f"torch.compile fails on the CPU too, so not because of the device: {on_cpu}"
    record.compiled_by_caller = reuse and count_graphs() == graphs_before  # nothing was traced again
    if given is not None and record.compiled_by_caller:  # the first call, which compiled, was the caller's; so were its graphs
        record.compile_time_s, record.backward_compile_time_s = given.forward_s, given.backward_s
        first_metric = graphs_before = 0
    norm = compare.grad_norm(model)
    model.zero_grad(set_to_none=True)
    ref = run.reference
    assert ref is not None  # the cpu step, which this one requires, set it
    record.graphs = count_graphs() - graphs_before
    record.graph_break_count = _graph_break_total() - breaks_before
    record.graph_breaks = _breaks(explain) if explain is not None else []
    record.parity = parity(run, out)
    if ref.loss is None or ref.grad_norm is None:
        raise ValueError("the CPU reference has no loss and gradient norm to hold the compiled training step to")
    loss_err, grad_err = compare.relative_error(loss.item(), ref.loss), compare.relative_error(norm, ref.grad_norm)
    training = record.training = CompileTraining(
        loss_cpu=ref.loss, loss_compiled=loss.item(), grad_norm_cpu=ref.grad_norm, grad_norm_compiled=norm,
        loss_rel_err=loss_err, grad_norm_rel_err=grad_err)
    training.ok = max(loss_err, grad_err) <= s.tol.train_rtol
    record.recompiles, record.recompile_shapes = _recompiles(run, compiled, count_graphs)
    metrics = [CompiledGraph(**dataclasses.asdict(m)) for m in torch.neuron.get_dynamo_metrics()[first_metric:]]
    record.neffs, record.graph_metrics = len(metrics), metrics
    record.fallback_ops = fallbacks = sorted({op for graph in metrics for op in graph.fallback_ops})
    run.compiled = compiled
    rows, top1 = record.parity.outputs, record.parity.top1_agreement
    bad = [r.name for r in rows if not r.ok] + ([] if training.ok else ["training step"])
    if bad:
        errors = [worst_error(rows)] if any(not r.ok for r in rows) else []
        if not training.ok:  # the outputs' error says nothing of the training step's (the eager train stage's words)
            errors.append(f"{'training step: ' if errors else ''}loss rel err {loss_err:.1e}, grad-norm rel err "
                          f"{grad_err:.1e} (> {s.tol.train_rtol:g})")
        return "fail", f"compiled {', '.join(bad)} off the CPU reference ({'; '.join(errors)})"
    summary = (f"{record.graphs} graph(s), {record.graph_break_count} graph break(s), {record.neffs} NEFF(s), "
               f"first call {format_duration(record.compile_time_s)} (includes compilation); matches CPU ({worst_error(rows)})")
    notes = top1_note(top1, s.tol)
    if record.graph_break_count or record.graph_breaks:
        reason = record.graph_breaks[0].reason if record.graph_breaks else "see graph_break_count"
        notes.append(f"graph break: {first_line(reason)}")
    if fallbacks:
        notes.append(f"{len(fallbacks)} op(s) in compiled graphs fall back to CPU: {', '.join(fallbacks)}")
    return ("warn", f"{summary}; " + "; ".join(notes)) if notes else ("pass", summary)


def run_timing(run: CheckRun, record: CompileTiming) -> tuple[str, str]:
    """Forward and training step (forward + backward), eager vs compiled, in the grad mode the graphs
    were compiled in, so timing never triggers a recompilation."""
    s = run.session
    model, _ = run.neuron()
    inputs = run.neuron_inputs
    compiled_model = run.compiled
    assert compiled_model is not None  # the compile step, which this one requires, made it

    def forward(m: torch.nn.Module) -> Callable[[], None]:
        def once() -> None:
            with s.device_mode():
                call(m, inputs, **s.extra)
        return once

    def train_step(m: torch.nn.Module) -> Callable[[], None]:
        def once() -> None:
            with s.device_mode():
                loss = compare.loss_of(call(m, inputs, **s.extra))
            loss.backward()
            model.zero_grad(set_to_none=True)
        return once

    record.runs = runs = run.config.of(CompileOptions).timing_runs
    medians = interleaved_medians({"eager": forward(model), "compiled": forward(compiled_model)}, runs=runs)
    record.eager_step_ms, record.compiled_step_ms = medians["eager"], medians["compiled"]
    record.speedup = record.eager_step_ms / record.compiled_step_ms
    medians = interleaved_medians({"eager": train_step(model), "compiled": train_step(compiled_model)}, runs=runs)
    record.eager_train_step_ms, record.compiled_train_step_ms = medians["eager"], medians["compiled"]
    record.train_speedup = record.eager_train_step_ms / record.compiled_train_step_ms
    compiled = run.results["compile"].evidence
    assert isinstance(compiled, CompileCheck)
    host = timing.clock() == "host"
    return "pass", (f"forward {format_ms(record.eager_step_ms)} -> {format_ms(record.compiled_step_ms)} "
                    f"({record.speedup:.2f}×), train step {format_ms(record.eager_train_step_ms)} -> "
                    f"{format_ms(record.compiled_train_step_ms)} ({record.train_speedup:.2f}×); first compiled "
                    f"call {format_duration(compiled.compile_time_s)}"
                    + ("; host timings of the simulated device, not Trainium's (no Trainium estimate exists "
                       "for compiled graphs)" if host else ""))


# ---------------------------------------------------------------------------------------------------
# Helpers.


def _recompiles(run: CheckRun, compiled: torch.nn.Module,
                count_graphs: Callable[[], int]) -> tuple[int | None, list[dict[str, list[int]]] | None]:
    """Call the compiled model with a second input shape: the graphs it compiles (§3: static shapes, one
    compilation per shape) and the two shapes (None, None when the inputs have no second shape).

    The call runs forward only, without autograd: Dynamo traces and compiles one graph per frame whatever the
    grad mode, and the probe counts those; a training call would also have AOTAutograd trace each graph's
    backward (a third of the probe's time on the bundled model) for a step nobody takes."""
    s = run.session
    other = _other_shape(run.neuron_inputs, sequence=example.varies_sequence(run.neuron_inputs))
    if other is None:
        return None, None
    before = count_graphs()
    with s.device_mode(), torch.no_grad():
        call(compiled, other, **s.extra)
    return count_graphs() - before, [_shapes(run.neuron_inputs), _shapes(other)]


def _graphs_reusable(s: Session) -> bool:
    """Whether the caller's compiled model can stand for the compile stage's own: the same calls in the same
    mode (float32, so no autocast), nothing frozen (on a layer slice the stage's device copy holds the
    embeddings and head fixed, `CheckRun.neuron`) and no graph break in this process (the stage's own
    compilation names each break and where it happened; Dynamo's counters alone cannot)."""
    return s.dtype is torch.float32 and not s.freeze and _graph_break_total() == 0


def _forward_graph_count() -> int:
    """The forward graphs the `neuron` backend compiled since `torch.neuron.reset_dynamo_metrics()`: one per
    Dynamo graph (and per input shape of a graph Dynamo made dynamic)."""
    return sum(getattr(m, "kind", None) == "forward" for m in torch.neuron.get_dynamo_metrics())


# Token-level targets and decoder inputs: cut with the sequence when they are as long as `input_ids`
# (an encoder-decoder's labels and decoder_input_ids must keep the same length as each other).
_TOKEN_TARGETS = ("labels", "decoder_input_ids", "decoder_attention_mask")


def _other_shape(inputs: Any, sequence: bool) -> Any:
    """The inputs in a second shape a real workload sees: text cut to half its sequence length (the token
    inputs, token-level labels and decoder inputs, keeping the last token), anything else (images, audio features, plain tensors) at twice the
    batch. Image sizes and audio frame counts are fixed by the model, so they never vary."""
    if sequence:
        ids = inputs["input_ids"]
        if ids.dim() < 2 or ids.shape[-1] < 2:
            return None
        length = ids.shape[-1] // 2
        cut = {k for k, v in inputs.items() if isinstance(v, torch.Tensor) and
               (k in example.SEQUENCE_INPUTS or (k in _TOKEN_TARGETS and v.shape == ids.shape))}
        # the first tokens and the last one: the sequence still ends as it did (BART-style classifiers pool at EOS)
        kept = torch.tensor([*range(length - 1), ids.shape[-1] - 1], device=ids.device)
        inputs = {k: v.index_select(-1, kept) if k in cut else v for k, v in inputs.items()}
        if "start_positions" in inputs:  # an answer span inside the shorter sequence
            start = inputs["start_positions"].clamp(max=max(length - 2, 0))
            inputs |= {"start_positions": start, "end_positions": start + 1}
        return inputs

    def double(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return torch.cat([value, value]) if value.dim() > 0 else value
        if isinstance(value, dict):
            return {k: double(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(double(v) for v in value)
        return value

    return double(inputs)


def _shapes(inputs: Any) -> dict[str, list[int]]:
    return {name: list(t.shape) for name, t in compare.named_outputs(inputs)}


def _breaks(explain: Any) -> list[GraphBreak]:
    """Each graph break behind a compiled graph: a one-line reason, where it happened, the full text."""
    breaks = []
    for reason in explain.break_reasons:
        frame = reason.user_stack[-1] if reason.user_stack else None
        breaks.append(GraphBreak(short_break_reason(str(reason.reason)),
                                 f"{frame.filename}:{frame.lineno} in {frame.name}" if frame else "unknown",
                                 " ".join(str(reason.reason).split())))
    return breaks


def _cpu_compile_error(s: Session, training: bool) -> str | None:
    """The error torch.compile meets on the CPU model, training one step as the compile step does, with
    Dynamo and AOTAutograd but no device and no lowering (backend "aot_eager"): a model whose code fails
    under any compile (transformers takes other paths while Dynamo traces), in words; None when it runs."""
    model, was_training = s.model, s.model.training
    torch._dynamo.reset()
    try:
        model.train(training)
        with s.cpu_mode(), same_draws():
            out = call(torch.compile(model, backend="aot_eager", dynamic=False), s.inputs, **s.extra)
            compare.loss_of(out).backward()
    except Exception as exc:  # noqa: BLE001 - whatever stops it on the CPU is the model's, not the device's
        cause: BaseException = getattr(exc, "inner_exception", None) or exc
        while isinstance(cause, TorchDynamoException) and (inner := cause.__cause__ or cause.__context__):
            cause = inner  # Dynamo's wrappers ("RuntimeError when making fake tensor call") of the op's own error
        return f"{type(cause).__name__}: {first_line(cause)}"
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
        torch._dynamo.reset()
    return None


def _graph_break_total() -> int:
    """Graph breaks Dynamo has counted in this process, including those in frames it then skipped."""
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values())


def short_break_reason(text: str) -> str:
    """Dynamo's break type plus what caused it: the error an op raised while tracing, else the first
    sentence of Dynamo's explanation."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    head = lines[0] if lines else "graph break"
    raised = re.search(r"got (\w+)\((['\"])(.*?)\2\)", text, re.DOTALL)
    if raised:
        return f"{head}: {raised[1]}: {_first_sentence(raised[3])}"
    explanation = next((line.removeprefix("Explanation:").strip() for line in lines[1:]
                        if line.startswith("Explanation:")), "")
    return f"{head}: {_first_sentence(explanation)}" if explanation else head


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    end = text.find(". ")
    return text if end < 0 else text[:end + 1]
