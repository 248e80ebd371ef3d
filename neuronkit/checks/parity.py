"""Eager-then-compile parity checks, staged: CPU reference, eager on neuron, generate, training,
torch.compile, timings.

The migration order the behaviour doc recommends (§2 eager first, §3 then `torch.compile`): the eager
and compiled runs are each compared with the CPU reference, and every stage is a `StageResult` with
pass / warn / fail and its evidence. A stage that raises is recorded as `error` with the traceback (the
check could not reach a verdict) and the next stages still run; a stage whose input is missing (the CPU
reference, or the compiled model timing needs) says `skipped` and why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import html
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import torch

from neuronkit import inputs as example, models
from neuronkit.calling import call, generation_prompt, greedy
from neuronkit.checks import refusals
from neuronkit.checks.host_products import device_products
from neuronkit.checks.reference import Reference
from neuronkit.evidence import CompileCheck, CompiledGraph, CompileTiming, CompileTraining, \
    CpuCheck, DeviceMemory, EagerForward, EagerGeneration, EagerTraining, GraphBreak, ModelSlice, NeffCache, \
    Parity, ParityRow, ReferenceOutput, rows
from neuronkit.graph_compile import compare
from neuronkit.graph_compile.backend import neuron_backend
from neuronkit.graph_compile.buckets import advise_buckets
from neuronkit import timing
from neuronkit.timing import interleaved_medians, timed
from neuronkit.units import format_duration, format_ms
from neuronkit.errors import NeuronkitInputError, require_positive_ints
from neuronkit.pipeline import STEP
from neuronkit.run_config import DEFAULTS
from neuronkit.stages import CHECK_STAGES, StageResult, recording, skipped, unmet, worst
from neuronkit.json_text import json_text

RECOMPILE_LIMIT = 64  # the check compiles several shapes and grad modes of one model


@dataclass(frozen=True)
class Compiled:
    """A model the caller compiled, `torch.compile(m, backend="neuron")` with `m` a copy of the checked model
    on the device, and called once for a training step (forward on the check's inputs, with its
    `forward_extras`, then backward), with what that first call took. The compile stage reuses its graphs
    rather than compiling again, when it can (`_graphs_reusable`); the graphs it counts are the
    `torch.neuron.get_dynamo_metrics()` records since the caller's last `reset_dynamo_metrics()`."""

    module: torch.nn.Module  # the OptimizedModule torch.compile returned
    forward_s: float  # the first forward call (it compiled the graphs), host seconds
    backward_s: float  # the first backward (it compiled the backward graphs), host seconds


@dataclass
class CheckReport:
    """All stages of one `check()` run, JSON-serializable. `weights` says where the model's weights came
    from; its warnings (random weights, checkpoint weights missing or dropped) make the status `warn`."""

    model: str
    dtype: str
    stages: list[StageResult]
    weights: models.Weights = field(default_factory=lambda: models.Weights("module"))
    model_slice: ModelSlice | None = None  # what ran: the full model or a layer slice (None: a module passed in)

    @property
    def warnings(self) -> list[str]:
        return self.weights.warnings()

    @property
    def status(self) -> str:
        """The worst stage status, at least `warn` with weight warnings (`skipped` only when nothing ran)."""
        return worst([s.status for s in self.stages] + ["warn"] * bool(self.warnings))

    @property
    def ok(self) -> bool:
        """True when no stage failed or raised."""
        return all(s.status not in ("fail", "error") for s in self.stages)

    def stage(self, name: str) -> StageResult | None:
        """The record of check stage `name`, None when it was not run."""
        return next((s for s in self.stages if s.stage == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "dtype": self.dtype, "status": self.status, "ok": self.ok,
                "random_weights": self.weights.random, "weights": self.weights.to_dict(),
                "model_slice": dataclasses.asdict(self.model_slice) if self.model_slice else None,
                "stages": [s.to_dict() for s in self.stages]}

    def to_json(self, path: str | Path | None = None) -> str:
        """The report as JSON text, also written to `path` when given."""
        return json_text(self.to_dict(), path, sort_keys=True, default=str)

    def table(self) -> str:
        """A fixed-width table: stage, status, seconds, summary."""
        random = ", random weights" if self.weights.random else ""
        lines = [f"neuronkit check: {self.model} ({self.dtype}{random}) -> {self.status.upper()}"]
        if self.model_slice is not None and not self.model_slice.full_model:
            lines.append(f"ran on {self.model_slice.describe()} ({self.model_slice.reason})")
        lines += [f"warning: {w}" for w in self.warnings]
        lines.append(f"{'stage':<9} {'status':<8} {'time':>7}  summary")
        for s in self.stages:
            lines.append(f"{s.stage:<9} {s.status.upper():<8} {s.duration_s or 0:>6.1f}s  {s.summary}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The table in a notebook cell (escaped)."""
        return f"<pre>{html.escape(self.table())}</pre>"


def check(model: torch.nn.Module | str | os.PathLike, inputs: Any = None, *, tokenizer: Any = None,
          stages: Iterable[str] = CHECK_STAGES, dtype: torch.dtype | str = DEFAULTS.dtype, train_steps: int = 2,
          lr: float = 1e-2, generate_tokens: int = 8, timing_runs: int = 5, batch_size: int = DEFAULTS.batch_size,
          seq_len: int = DEFAULTS.seq_len, model_name: str | None = None, random_weights: bool = False,
          reference: Reference | None = None, bucket_prompts: str | os.PathLike | None = None,
          max_buckets: int = 4, layers: int | None = DEFAULTS.layers,
          full_model: bool = DEFAULTS.full_model, compiled: Compiled | None = None,
          device_model: torch.nn.Module | None = None, freeze_embeddings: bool | None = None) -> CheckReport:
    """Run the staged parity checks on a model (a module, or a MODEL spec `neuronkit.models` resolves).

    `inputs` default to `neuronkit.inputs.example_inputs` for Hugging Face models; a `.txt` file gives
    them a team's prompts (one per line), a `.safetensors` file its own named tensors. A MODEL spec loads
    the checkpoint's own weights; `random_weights=True` builds it from its config instead (the report
    says so). `dtype` float32
    compares fp32 numerics tightly; bfloat16/float16 run the device under `torch.autocast('neuron')`
    against the CPU under `torch.autocast('cpu')` of the same dtype (like with like: the tolerance bounds
    what the device adds, not what the dtype costs), with looser tolerances; a MODEL spec loads its
    weights in `dtype`. `stages` may name a subset; the stages they
    compare against are added. A CPU module serves as the reference itself (in eval mode); the device
    runs a copy. A module passed on the device runs there itself (its mode and gradient flags given back
    afterwards) and is copied to the CPU only if a stage computes on the CPU. The eager stage clears
    torch_neuronx's op tracking, and the compile stage calls `torch._dynamo.reset()` first, so their op
    lists, graph and recompile counts are this model's alone.
    `reference` (the CPU baseline's, `Reference.load`) replaces the `cpu` stage's run and the inputs:
    the device is held to exactly the numbers the baseline recorded. The compile stage advises at most
    `max_buckets` shape buckets for the token lengths of `bucket_prompts` (one prompt per line; default:
    a prompts.txt given as `inputs`, else the bundled sample prompts; the record names which). A MODEL spec too large for the budget runs as a layer slice (its first
    `layers` blocks; 0 or None: as many as fit, `neuronkit.slicing`) unless `full_model`; the report says which.
    `freeze_embeddings` holds the input embeddings and the head fixed in every backward (the CPU
    reference's, training, compile): on a layer slice they are most of its parameters, and their
    gradients would double its memory; None freezes them exactly when a layer slice runs.
    `dtype`, `seq_len`, `batch_size`, `layers` and `full_model` default to the run configuration's
    (`neuronkit.run_config`). `compiled` (`Compiled`): the device model the caller already compiled and
    called, which the device stages use instead of a copy of their own, and whose graphs the compile stage
    reuses when they stand for its own (float32, nothing frozen: it compiles that module again otherwise).
    `device_model`: the caller's model already on the current core with `model`'s weights (notebook 02 loads
    it there): the device stages run it instead of a copy. Either way one copy of the weights fewer; the
    caller's module gets its mode and gradient flags back afterwards, and the training stage undoes its steps."""
    wanted = _resolve_stages(stages)
    require_positive_ints(train_steps=train_steps, generate_tokens=generate_tokens, timing_runs=timing_runs,
                          max_buckets=max_buckets)
    if bucket_prompts is None and isinstance(inputs, (str, os.PathLike)) and Path(inputs).suffix == ".txt":
        bucket_prompts = inputs  # the team's prompts size the buckets too
    if bucket_prompts is not None and not Path(bucket_prompts).is_file():
        raise NeuronkitInputError(f"bucket_prompts: no prompts file at {bucket_prompts}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        raise NeuronkitInputError(f"lr must be a positive number, got {lr!r}")
    if not isinstance(random_weights, bool):
        raise NeuronkitInputError(f"random_weights must be True or False, got {random_weights!r}")
    if device_model is not None and (not isinstance(device_model, torch.nn.Module) or
                                     any(p.device.type != "neuron" for p in device_model.parameters())):
        raise NeuronkitInputError("device_model must be a torch.nn.Module whose parameters are on a neuron device")
    session = _Session.build(model, inputs, tokenizer, models.compute_dtype(dtype), model_name,
                             random_weights, train_steps=train_steps, lr=lr, generate_tokens=generate_tokens,
                             timing_runs=timing_runs, batch_size=batch_size, seq_len=seq_len,
                             bucket_prompts=bucket_prompts, max_buckets=max_buckets, layers=layers or None,
                             full_model=full_model, compiled=compiled, device_model=device_model)
    if freeze_embeddings is not None:
        session.freeze = freeze_embeddings
    if reference is not None:
        session.inputs, session.reference = reference.inputs, reference
    lent = device_model or session.on_device or (compiled.module._orig_mod if compiled is not None else None)
    with _lent(lent):
        for name in wanted:
            session.results[name] = _run_stage(name, _STAGE_FUNCTIONS[name], session)
    return CheckReport(session.name, str(session.dtype).removeprefix("torch."), list(session.results.values()),
                       session.weights, session.model_slice)


@contextlib.contextmanager
def _lent(model: torch.nn.Module | None) -> Iterator[None]:
    """The caller's device model, in eval mode inside the block; afterwards its mode and gradient flags are
    as they were."""
    if model is None:
        yield
        return
    was_training, flags = model.training, [(p, p.requires_grad) for p in model.parameters()]
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
        for param, flag in flags:
            param.requires_grad_(flag)


def _resolve_stages(stages: Iterable[str]) -> list[str]:
    names = [stages] if isinstance(stages, str) else list(stages)
    unknown = [n for n in names if n not in CHECK_STAGES]
    if unknown or not names:
        raise NeuronkitInputError(f"unknown stage(s) {unknown or names!r}; choose from {', '.join(CHECK_STAGES)}")
    wanted = set(names)
    for name in names:  # and what each compares against (Step.requires: eager and compile the CPU reference)
        while (needed := STEP[name].requires) is not None:
            wanted.add(name := needed)
    return [s for s in CHECK_STAGES if s in wanted]


def _run_stage(name: str, fn: Callable, session: "_Session") -> StageResult:
    """One check step, by the workbook's stage executor (`neuronkit.stages.recording`): skipped when the
    step it compares against did not pass; a crash is its `error` record, and the next steps still run."""
    needed, results = STEP[name].requires, session.results
    record = STEP[name].evidence()
    if needed is not None and not results[needed].ok:
        return skipped(name, f"skipped: {unmet(needed, results[needed])}; {name} needs it", record)
    with recording(None, name, record, reraise=False, explain=refusals.explain) as slot:
        slot["status"], slot["summary"] = fn(session, record)
    return slot["result"]


class _Session:
    """The model under test, its inputs and what the stages hand to each other."""

    def __init__(self, name: str, model: torch.nn.Module, inputs: Any, tokenizer: Any, dtype: torch.dtype,
                 weights: models.Weights, **settings: Any) -> None:
        self.name = name
        self.weights = weights
        on_cpu = all(p.device.type == "cpu" for p in model.parameters())
        self._cpu_model = model if on_cpu else None
        self.on_device = None if on_cpu else model  # a model passed on the device: run there, copied when needed
        self.inputs = inputs
        self.tokenizer = tokenizer
        self.dtype = dtype
        self.tol = compare.tolerance_for(dtype)
        self.settings = settings
        config = getattr(model, "config", None)
        self.config = config
        self.extra = forward_extras(model)
        self.cpu_out: Any = None
        self.reference: Reference | None = None  # the CPU baseline's, read instead of running the CPU model
        self._neuron: tuple[torch.nn.Module, list[list[str]]] | None = None
        self.neuron_inputs: Any = None
        self.compiled: torch.nn.Module | None = None
        self.results: dict[str, StageResult] = {}  # each stage's record, read by the stages after it
        self.model_slice: ModelSlice | None = None  # what a MODEL spec loaded as (None: a module passed in)
        self.freeze = False  # input embeddings and head held fixed in every backward (`check`'s freeze_embeddings)

    @property
    def cpu_model(self) -> torch.nn.Module:
        """The model on the CPU: the one passed in, or for a model passed on the device a copy made (tensor by
        tensor) the first time a stage computes on the CPU; the compile stage against a saved reference never
        does, so notebook 04 holds one copy of the weights."""
        if self._cpu_model is None:
            self._cpu_model = compare.device_copy(self.on_device, "cpu")[0].eval()
        return self._cpu_model

    @classmethod
    def build(cls, model: Any, inputs: Any, tokenizer: Any, dtype: torch.dtype, model_name: str | None,
              random_weights: bool, layers: int | None = None, full_model: bool = False,
              **settings: Any) -> "_Session":
        name = model_name
        weights, processor, piece = models.Weights("module"), None, None
        if isinstance(model, (str, os.PathLike)):
            name = name or str(model)
            spec = model
            model, weights, piece = models.load_slice(spec, dtype, layers=layers, full_model=full_model,
                                                      random_weights=random_weights)  # config first
            tokenizer = tokenizer if tokenizer is not None else models.load_tokenizer(spec)
            processor = example.processor_config(spec)
        elif layers is not None or full_model:
            raise NeuronkitInputError("layers and full_model slice a MODEL spec (a checkpoint); a module passed in "
                                      "runs as it is")
        prompts = None
        if isinstance(inputs, (str, os.PathLike)) and Path(inputs).suffix == ".txt":
            inputs, prompts = None, example.read_prompts(inputs)
        elif isinstance(inputs, (str, os.PathLike)):
            inputs = example.load_inputs(inputs)
        if not isinstance(model, torch.nn.Module):
            raise NeuronkitInputError(f"model must be a torch.nn.Module or a MODEL spec, got {type(model).__name__}")
        if inputs is None:
            inputs = _default_inputs(model, tokenizer, settings["batch_size"], settings["seq_len"], processor, prompts)
        session = cls(name or type(model).__name__, model, compare.move_inputs(inputs, "cpu"), tokenizer, dtype,
                      weights, **settings)
        if session.on_device is None:
            model.eval()  # the reference; a model on the device is put in eval mode while it is lent (`_lent`)
        session.model_slice = piece
        session.freeze = piece is not None and not piece.full_model
        return session

    def device_mode(self) -> contextlib.AbstractContextManager:
        """Autocast to the checked dtype on the device (fp32: no autocast)."""
        if self.dtype in (torch.bfloat16, torch.float16):
            return torch.autocast("neuron", dtype=self.dtype)
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def cpu_mode(self) -> Iterator[None]:
        """The CPU side's counterpart of `device_mode`: autocast to the checked dtype on the CPU, its matrix
        products computed as the device computes them (`host_products`)."""
        with device_products(self.dtype):
            if self.dtype in (torch.bfloat16, torch.float16):
                with torch.autocast("cpu", dtype=self.dtype):
                    yield
            else:
                yield

    def neuron(self) -> tuple[torch.nn.Module, list[list[str]]]:
        """The model on the device: the caller's (`device_model`, the module under the caller's `compiled`
        model, or a `model` passed on the device), else a copy made once; its embeddings and head without
        gradients while the session freezes them; and the tied parameter groups `.to()` had untied."""
        given: Compiled | None = self.settings["compiled"]
        if self._neuron is None:
            caller: torch.nn.Module | None = (self.settings["device_model"] or self.on_device
                                              or (given.module._orig_mod if given else None))
            model, untied = self._neuron = (caller, []) if caller is not None else \
                compare.device_copy(self.cpu_model, "neuron")
            for param in frozen_parameters(model, self.freeze):
                param.requires_grad_(False)
            self.neuron_inputs = compare.move_inputs(self.inputs, "neuron")
        return self._neuron


def _default_inputs(model: torch.nn.Module, tokenizer: Any, batch_size: int, seq_len: int,
                    processor: dict[str, Any] | None, prompts: list[str] | None) -> dict[str, torch.Tensor]:
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "get_text_config"):
        raise NeuronkitInputError(f"{type(model).__name__} is not a Hugging Face model: pass inputs=")
    return example.example_inputs(config, tokenizer, batch_size, seq_len, processor=processor, prompts=prompts)


# ---------------------------------------------------------------------------------------------------
# Stages: each fills its typed record (its `Step.evidence`, neuronkit/data/stages.toml) as it goes (kept if it
# raises) and returns (status, summary).


# Each check step's body, by step name (`_step`); the steps and their order are neuronkit/data/stages.toml's.
StepBody = Callable[["_Session", Any], tuple[str, str]]
_STAGE_FUNCTIONS: dict[str, StepBody] = {}


def _step(name: str) -> Callable[[StepBody], StepBody]:
    """Register the decorated function as check step `name`'s body: it fills the step's record and returns
    (status, summary)."""
    def register(body: StepBody) -> StepBody:
        _STAGE_FUNCTIONS[name] = body
        return body
    return register


def forward_extras(model: torch.nn.Module) -> dict[str, Any]:
    """Keyword arguments of every parity forward: Hugging Face models run without a KV cache (it is not
    an output worth comparing)."""
    return {"use_cache": False} if getattr(getattr(model, "config", None), "use_cache", None) is not None else {}


def frozen_parameters(model: torch.nn.Module, freeze: bool) -> list[torch.nn.Parameter]:
    """The input embeddings' and the head's weights when `freeze` (once each: a tied head is the
    embedding), else none."""
    if not freeze:
        return []
    found: dict[int, torch.nn.Parameter] = {}
    for get in ("get_input_embeddings", "get_output_embeddings"):
        module = getattr(model, get, lambda: None)()
        weight = getattr(module, "weight", None)
        if isinstance(weight, torch.nn.Parameter):
            found[id(weight)] = weight
    return list(found.values())


@contextlib.contextmanager
def gradients_for(model: torch.nn.Module, freeze: bool, *, restore: bool = False) -> Iterator[list[str]]:
    """Inside the block, `model`'s parameters take gradients except the embeddings and head when `freeze`;
    after it, their gradient flags are as they were, their gradients cleared, and with `restore` their
    values too (a training run on the model itself, undone). Yields the names held fixed."""
    frozen = {id(p) for p in frozen_parameters(model, freeze)}
    named = list(model.named_parameters())
    flags = [(p, p.requires_grad) for _, p in named]
    saved = [(p, p.detach().clone()) for _, p in named if restore and p.requires_grad and id(p) not in frozen]
    for _, param in named:
        param.requires_grad_(param.requires_grad and id(param) not in frozen)
    try:
        yield [name for name, p in named if id(p) in frozen]
    finally:
        with torch.no_grad():
            for param, value in saved:
                param.copy_(value)
        for param, flag in flags:
            param.requires_grad_(flag)
            param.grad = None


def cpu_reference(model: torch.nn.Module, inputs: Any, *, dtype: torch.dtype = torch.float32,
                  freeze_embeddings: bool = False, **extra: Any) -> Reference:
    """The CPU model's named outputs on `inputs`, and the loss and gradient norm of one backward from
    them (what a compiled training step is held to); the model's gradients are cleared afterwards.
    A bfloat16/float16 `dtype` runs it under CPU autocast of that dtype, as the device runs under its
    own; `freeze_embeddings` takes no gradient for the embeddings and head (`gradients_for`)."""
    mode = torch.autocast("cpu", dtype=dtype) if dtype in (torch.bfloat16, torch.float16) else contextlib.nullcontext()
    with gradients_for(model, freeze_embeddings), device_products(dtype):
        with mode:
            out = call(model, inputs, **extra)
            loss = compare.loss_of(out)
        loss.backward()
        norm = compare.grad_norm(model)
    outputs = {name: t.detach() for name, t in compare.named_outputs(out)}
    named = inputs if isinstance(inputs, dict) else dict(compare.named_outputs(inputs))
    return Reference(named, outputs, loss.item(), norm)


@_step("cpu")
def _stage_cpu(s: _Session, record: CpuCheck) -> tuple[str, str]:
    record.reused = s.reference is not None
    if s.reference is None:
        s.reference = cpu_reference(s.cpu_model, s.inputs, dtype=s.dtype, freeze_embeddings=s.freeze, **s.extra)
    s.cpu_out = s.reference.outputs
    record.outputs = [ReferenceOutput(n, list(t.shape), str(t.dtype).removeprefix("torch."))
                      for n, t in s.cpu_out.items()]
    record.grad_norm = s.reference.grad_norm
    if record.reused:
        record.loss = s.reference.loss
        return "pass", f"{len(record.outputs)} output(s) read from the CPU baseline's reference"
    with torch.no_grad(), s.cpu_mode():
        record.forward_ms = interleaved_medians({"cpu": lambda: call(s.cpu_model, s.inputs, **s.extra)},
                                                runs=5, warmup=2)["cpu"]
    loss = s.cpu_out.get("loss")
    record.loss = None if loss is None else loss.item()
    record.threads = torch.get_num_threads()
    record.parameters = sum(p.numel() for p in s.cpu_model.parameters())
    return "pass", (f"{len(record.outputs)} output(s), CPU forward {format_ms(record.forward_ms)} on "
                    f"{record.threads} threads")


@_step("eager")
def _stage_eager(s: _Session, record: EagerForward) -> tuple[str, str]:
    import torch_neuronx

    model, untied = s.neuron()
    torch_neuronx.clear_op_tracking()
    torch.neuron.reset_peak_memory_stats()
    before = torch.neuron.neff_cache_stats()
    with torch.no_grad(), s.device_mode():
        out = call(model, s.neuron_inputs, **s.extra)
    record.parity = _parity(s, out)
    record.untied_parameters = untied
    record.fallback_ops = fallbacks = sorted(torch_neuronx.get_fallback_ops())
    record.executed_ops = len(torch_neuronx.get_executed_ops())
    record.neff_cache = _cache_delta(before)
    record.memory = DeviceMemory(torch.neuron.memory_allocated(), torch.neuron.max_memory_allocated(),
                                 torch.neuron.get_device_properties(torch.neuron.current_device()).total_memory)
    record.autocast = _autocast_name(s)
    rows, top1 = record.parity.outputs, record.parity.top1_agreement
    bad = [r.name for r in rows if not r.ok]
    if bad:
        return "fail", f"{', '.join(bad)} off the CPU reference ({_worst(rows)})"
    notes = _top1_note(top1, s.tol)
    if untied:
        notes.append(f".to('neuron') untied {len(untied)} shared parameter group(s) (re-tied for the check): the "
                     "device keeps tied weights tied, so the model replaces them itself; call model.tie_weights()")
    if fallbacks:
        notes.append(f"{len(fallbacks)} op(s) fall back to CPU: {', '.join(fallbacks)}")
    summary = f"matches CPU ({_worst(rows)}" + (f", top-1 {top1:.0%})" if top1 is not None else ")")
    return ("warn", f"{summary}; " + "; ".join(notes)) if notes else ("pass", summary)


@contextlib.contextmanager
def _fallbacks_into(record: EagerGeneration | EagerTraining) -> Iterator[None]:
    """Record in `record.fallback_ops` the ops that fell back to CPU inside the block."""
    import torch_neuronx

    torch_neuronx.clear_op_tracking()
    try:
        yield
    finally:
        record.fallback_ops = sorted(torch_neuronx.get_fallback_ops())


@_step("generate")
def _stage_generate(s: _Session, record: EagerGeneration) -> tuple[str, str]:
    if not (hasattr(s.cpu_model, "can_generate") and s.cpu_model.can_generate()):
        return "skipped", f"{type(s.cpu_model).__name__} does not generate (not a causal LM or encoder-decoder)"
    inputs = s.inputs if isinstance(s.inputs, dict) else {"input_ids": s.inputs}
    prompt = {k: v[:1] for k, v in generation_prompt(inputs).items()}
    tokens = s.settings["generate_tokens"]
    with s.cpu_mode():
        cpu_tokens = greedy(s.cpu_model, prompt, tokens, s.tokenizer)[0].tolist()
    model, _ = s.neuron()
    with s.device_mode(), _fallbacks_into(record):
        device_tokens = greedy(model, compare.move_inputs(prompt, "neuron"), tokens, s.tokenizer)[0].cpu().tolist()
    start = 1 if s.config.is_encoder_decoder else prompt["input_ids"].shape[1]
    diverge = next((i for i, (a, b) in enumerate(zip(cpu_tokens, device_tokens)) if a != b),
                   None if len(cpu_tokens) == len(device_tokens) else min(len(cpu_tokens), len(device_tokens)))
    record.prompt_tokens, record.cpu_tokens, record.neuron_tokens = start, cpu_tokens, device_tokens
    record.generate_identical, record.first_divergence = diverge is None, diverge
    if s.tokenizer is not None:
        record.cpu_text, record.neuron_text = s.tokenizer.decode(cpu_tokens), s.tokenizer.decode(device_tokens)
    fallbacks = record.fallback_ops
    note = f"; {len(fallbacks)} op(s) fall back to CPU: {', '.join(fallbacks)}" if fallbacks else ""
    if diverge is None:
        return "pass", f"greedy generate(): {len(cpu_tokens)} identical tokens{note}"
    status = "fail" if s.dtype is torch.float32 else "warn"
    return status, f"greedy generate() diverges from CPU at new token {diverge}"


@_step("train")
def _stage_train(s: _Session, record: EagerTraining) -> tuple[str, str]:
    """SGD, not Adam: Adam divides each gradient by its own magnitude, so rounding-level differences in
    near-zero gradients become full-size updates, which says nothing about the device. The CPU model and
    the device copy train themselves, each undone afterwards (no third and fourth copy of the weights);
    the CPU runs under CPU autocast of the checked dtype, as the device under its own."""
    lr, steps = s.settings["lr"], s.settings["train_steps"]
    device_model, _ = s.neuron()
    runs = {"cpu": (s.cpu_model, s.inputs, s.cpu_mode),
            "neuron": (device_model, s.neuron_inputs, s.device_mode)}
    history: dict[str, dict[str, list[float]]] = {}
    source = "model"
    for device, (model, inputs, mode) in runs.items():
        losses, norms = [], []
        was_training = model.training
        with _fallbacks_into(record) if device == "neuron" else device_products(s.dtype), \
                gradients_for(model, s.freeze, restore=True) as frozen:
            model.train()
            optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
            try:
                for step in range(steps):
                    _seed(step)  # same dropout and masking on both devices (the device RNG is the host's)
                    with mode():
                        out = call(model, inputs, **s.extra)
                        loss = compare.loss_of(out)
                    source = compare.loss_source(out)
                    loss.backward()
                    losses.append(loss.item())
                    norms.append(compare.grad_norm(model))
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
            finally:
                model.train(was_training)
        history[device] = {"losses": losses, "grad_norms": norms}
    loss_err = max(map(compare.relative_error, history["neuron"]["losses"], history["cpu"]["losses"]))
    grad_err = max(map(compare.relative_error, history["neuron"]["grad_norms"], history["cpu"]["grad_norms"]))
    ok = loss_err <= s.tol.train_rtol and grad_err <= s.tol.train_rtol
    record.cpu_losses, record.grad_norm_cpu = history["cpu"]["losses"], history["cpu"]["grad_norms"]
    record.neuron_losses, record.grad_norm_neuron = history["neuron"]["losses"], history["neuron"]["grad_norms"]
    record.max_loss_rel_err, record.max_grad_norm_rel_err, record.rtol = loss_err, grad_err, s.tol.train_rtol
    record.optimizer, record.steps, record.ok = f"SGD(lr={lr})", steps, ok
    record.cpu_autocast, record.frozen, record.loss_source = _autocast_name(s), frozen, source
    held = f" ({', '.join(frozen)} held fixed)" if frozen else ""
    on = "" if source == "model" else f" on the {source} (the model has no loss of its own)"
    summary = f"{steps} SGD steps{held}{on}: loss rel err {loss_err:.1e}, grad-norm rel err {grad_err:.1e}"
    return ("pass" if ok else "fail"), summary + ("" if ok else f" (> {s.tol.train_rtol:g})")


@_step("compile")
def _stage_compile(s: _Session, record: CompileCheck) -> tuple[str, str]:
    from torch._dynamo.backends.debugging import ExplainWithBackend

    record.buckets = advise_buckets(s.tokenizer, s.config, s.settings["bucket_prompts"], s.settings["max_buckets"])
    model, _ = s.neuron()
    inputs = s.neuron_inputs
    given: Compiled | None = s.settings["compiled"]
    reuse = given is not None and _graphs_reusable(s)
    if reuse:  # the caller's compiled model: its graphs serve the calls below
        explain, compiled, count_graphs = None, given.module, _forward_graph_count
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
    with s.device_mode():
        out, record.compile_time_s = timed(lambda: call(compiled, inputs, **s.extra))
    loss = compare.loss_of(out)
    _, record.backward_compile_time_s = timed(loss.backward)
    record.compiled_by_caller = reuse and count_graphs() == graphs_before  # nothing was traced again
    if record.compiled_by_caller:  # the first call, which compiled, was the caller's; so were its graphs
        record.compile_time_s, record.backward_compile_time_s = given.forward_s, given.backward_s
        first_metric = graphs_before = 0
    norm = compare.grad_norm(model)
    model.zero_grad(set_to_none=True)
    ref = s.reference
    record.graphs = count_graphs() - graphs_before
    record.graph_break_count = _graph_break_total() - breaks_before
    record.graph_breaks = _breaks(explain) if explain is not None else []
    record.parity = _parity(s, out)
    training = record.training = CompileTraining(
        loss_cpu=ref.loss, loss_compiled=loss.item(), grad_norm_cpu=ref.grad_norm, grad_norm_compiled=norm,
        loss_rel_err=compare.relative_error(loss.item(), ref.loss),
        grad_norm_rel_err=compare.relative_error(norm, ref.grad_norm))
    training.ok = max(training.loss_rel_err, training.grad_norm_rel_err) <= s.tol.train_rtol
    record.recompiles, record.recompile_shapes = _recompiles(s, compiled, count_graphs)
    metrics = [CompiledGraph(**dataclasses.asdict(m)) for m in torch.neuron.get_dynamo_metrics()[first_metric:]]
    record.neffs, record.graph_metrics = len(metrics), metrics
    record.fallback_ops = fallbacks = sorted({op for graph in metrics for op in graph.fallback_ops})
    s.compiled = compiled
    rows, top1 = record.parity.outputs, record.parity.top1_agreement
    bad = [r.name for r in rows if not r.ok] + ([] if training.ok else ["training step"])
    if bad:
        return "fail", f"compiled {', '.join(bad)} off the CPU reference ({_worst(rows)})"
    summary = (f"{record.graphs} graph(s), {record.graph_break_count} graph break(s), {record.neffs} NEFF(s), "
               f"first call {format_duration(record.compile_time_s)} (includes compilation); matches CPU ({_worst(rows)})")
    notes = _top1_note(top1, s.tol)
    if record.graph_break_count or record.graph_breaks:
        reason = record.graph_breaks[0].reason if record.graph_breaks else "see graph_break_count"
        notes.append(f"graph break: {_first_line(reason)}")
    if fallbacks:
        notes.append(f"{len(fallbacks)} op(s) in compiled graphs fall back to CPU: {', '.join(fallbacks)}")
    return ("warn", f"{summary}; " + "; ".join(notes)) if notes else ("pass", summary)


@_step("timing")
def _stage_timing(s: _Session, record: CompileTiming) -> tuple[str, str]:
    """Forward and training step (forward + backward), eager vs compiled, in the grad mode the graphs
    were compiled in, so timing never triggers a recompilation."""
    model, _ = s.neuron()
    inputs = s.neuron_inputs

    def forward(m: torch.nn.Module) -> Callable[[], None]:
        def run() -> None:
            with s.device_mode():
                call(m, inputs, **s.extra)
        return run

    def train_step(m: torch.nn.Module) -> Callable[[], None]:
        def run() -> None:
            with s.device_mode():
                loss = compare.loss_of(call(m, inputs, **s.extra))
            loss.backward()
            model.zero_grad(set_to_none=True)
        return run

    record.runs = runs = s.settings["timing_runs"]
    medians = interleaved_medians({"eager": forward(model), "compiled": forward(s.compiled)}, runs=runs)
    record.eager_step_ms, record.compiled_step_ms = medians["eager"], medians["compiled"]
    record.speedup = record.eager_step_ms / record.compiled_step_ms
    medians = interleaved_medians({"eager": train_step(model), "compiled": train_step(s.compiled)}, runs=runs)
    record.eager_train_step_ms, record.compiled_train_step_ms = medians["eager"], medians["compiled"]
    record.train_speedup = record.eager_train_step_ms / record.compiled_train_step_ms
    compiled: CompileCheck = s.results["compile"].evidence
    host = timing.clock() == "host"
    return "pass", (f"forward {format_ms(record.eager_step_ms)} -> {format_ms(record.compiled_step_ms)} "
                    f"({record.speedup:.2f}×), train step {format_ms(record.eager_train_step_ms)} -> "
                    f"{format_ms(record.compiled_train_step_ms)} ({record.train_speedup:.2f}×); first compiled "
                    f"call {format_duration(compiled.compile_time_s)}"
                    + ("; host timings of the simulated device, not Trainium's (no Trainium estimate exists "
                       "for compiled graphs)" if host else ""))




# ---------------------------------------------------------------------------------------------------
# Helpers.


def _seed(step: int) -> None:
    """Seed every generator a training step may draw from: torch's (dropout; the device's is the host's), and
    NumPy's and Python's, which transformers' speech models draw their SpecAugment masks from
    (`_compute_mask_indices`): otherwise the CPU and the device steps mask different frames."""
    random.seed(step)
    np.random.seed(step)
    torch.manual_seed(step)


def _recompiles(s: _Session, compiled: torch.nn.Module,
                count_graphs: Callable[[], int]) -> tuple[int | None, list[dict[str, list[int]]] | None]:
    """Call the compiled model with a second input shape: the graphs it compiles (§3: static shapes, one
    compilation per shape) and the two shapes (None, None when the inputs have no second shape).

    The call runs forward only, without autograd: Dynamo traces and compiles one graph per frame whatever the
    grad mode, and the probe counts those; a training call would also have AOTAutograd trace each graph's
    backward (a third of the probe's time on the bundled model) for a step nobody takes."""
    other = _other_shape(s.neuron_inputs, sequence=example.varies_sequence(s.neuron_inputs))
    if other is None:
        return None, None
    before = count_graphs()
    with s.device_mode(), torch.no_grad():
        call(compiled, other, **s.extra)
    return count_graphs() - before, [_shapes(s.neuron_inputs), _shapes(other)]


def _graphs_reusable(s: _Session) -> bool:
    """Whether the caller's compiled model can stand for the compile stage's own: the same calls in the same
    mode (float32, so no autocast), nothing frozen (on a layer slice the stage's device copy holds the
    embeddings and head fixed, `_Session.neuron`) and no graph break in this process (the stage's own
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


def _parity(s: _Session, out: Any) -> Parity:
    """A device run's outputs against the CPU reference's."""
    return Parity(outputs=rows(ParityRow, compare.compare_outputs(s.cpu_out, out, s.tol)),
                  top1_agreement=compare.top1_agreement(s.cpu_out, out))


def _cache_delta(before: dict[str, Any]) -> NeffCache:
    after = torch.neuron.neff_cache_stats()
    return NeffCache(**{k: after[k] - before[k] for k in ("hits", "disk_hits", "misses", "entries", "compile_s")})


def _autocast_name(s: _Session) -> str | None:
    return None if s.dtype is torch.float32 else str(s.dtype).removeprefix("torch.")


def _top1_note(top1: float | None, tol: compare.Tolerance) -> list[str]:
    return [f"top-1 agreement {top1:.1%} below {tol.min_top1:.0%}"] if top1 is not None and top1 < tol.min_top1 else []


def _worst(rows: Sequence[ParityRow]) -> str:
    errors = [r for r in rows if r.max_abs_err is not None]
    if not errors:
        return "no floating outputs" if not rows else "see outputs"
    worst = max(errors, key=lambda r: r.max_abs_err)
    return f"max abs err {worst.max_abs_err:.1e} on {worst.name}"


def _first_line(value: object) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else type(value).__name__
