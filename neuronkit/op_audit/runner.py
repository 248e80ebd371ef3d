"""Run a model under the op recorder, forward and optionally backward, optimizer step and generate.

A MODEL spec or a config is audited weightless: the model is built inside `FakeTensorMode`, so its
parameters and activations carry shapes and dtypes but no storage, and an 8B model audits in seconds
on a laptop. Only `generate` needs real tensors (its stopping logic reads values); it then runs on
random weights, which must fit in memory, since weight values never change which ops run.
"""

from __future__ import annotations

import functools
import os
import traceback
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import transformers
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only
from transformers import PretrainedConfig

import neuronkit
from neuronkit import inputs as example, models
from neuronkit.evidence import AuditedModel
from neuronkit.op_audit.classify import classify
from neuronkit.op_audit.compat import api_rows
from neuronkit.op_audit.recorder import BACKWARD, GENERATE, OpRecorder
from neuronkit.op_audit.report import AuditReport
from neuronkit.calling import call, generation_prompt, greedy
from neuronkit.errors import NeuronkitInputError
from neuronkit.policy import load_policy
from neuronkit.pipeline.config import DEFAULTS, RunConfig
from neuronkit.pipeline.record import first_line

OPTIMIZER = "<optimizer>"
# Frames of torch, the recorder and context managers: not where a model's code stopped a trace.
_INTERNALS = (f"{os.sep}torch{os.sep}", f"{os.sep}neuronkit{os.sep}op_audit{os.sep}", f"{os.sep}contextlib.py")


def audit(model: nn.Module | PretrainedConfig | str | os.PathLike, example_inputs: Any = None, *,
          backward: bool = False, optimizer_step: bool = False, generate: bool = False,
          weightless: bool | None = None, max_new_tokens: int = 4, trust_remote_code: bool = False,
          config: RunConfig = DEFAULTS, **options: Any) -> AuditReport:
    """Record every ATen op `model` runs and classify it against Neuron support.

    `model` is an nn.Module (audited as it is, on its own weights), or a MODEL spec / config (audited
    weightless unless `weightless=False`). `example_inputs` is a dict of keyword arguments, a tuple of
    positional ones or one tensor; by default deterministic token ids for a Hugging Face model, shaped by
    the run configuration `config` (`dtype`, `batch_size`, `seq_len`; `options` set them by name).
    `optimizer_step` implies `backward`: one AdamW step (fused, the Hugging Face Trainer default) with
    lr=0, so the model's weights are left as they were; its `.grad` and train/eval mode are restored.
    """
    config = config.with_options(**options)
    dtype, batch_size, seq_len = config.dtype, config.batch_size, config.seq_len
    for flag, value in (("backward", backward), ("optimizer_step", optimizer_step), ("generate", generate)):
        if not isinstance(value, bool):
            raise NeuronkitInputError(f"{flag} must be True or False, got {value!r}")
    backward = backward or optimizer_step
    dtype = models.compute_dtype(dtype)
    target = _Target.resolve(model, weightless, generate, dtype, trust_remote_code)
    trace = functools.partial(_trace, example_inputs=example_inputs, batch_size=batch_size, seq_len=seq_len,
                              backward=backward, optimizer_step=optimizer_step, generate=generate,
                              max_new_tokens=max_new_tokens)
    try:
        module, inputs, recorder = trace(target)
    except NeuronkitInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever stops a weightless trace, a real run may not
        if target.fake_mode is None:
            raise
        target = target.on_random_weights(model, exc)
        module, inputs, recorder = trace(target)
    policy = load_policy()
    ops, findings, summary = classify(recorder.ops, policy)
    apis = api_rows(recorder.apis, ops, findings, policy)
    phases = ["forward"] + ["backward"] * backward + ["optimizer_step"] * optimizer_step + ["generate"] * generate
    return AuditReport(summary=summary, ops=ops, findings=findings, severities=dict(policy.severity),
                       remedies=dict(policy.remedies), model=target.describe(module, inputs, phases, dtype),
                       versions=_versions(), apis=apis)


def _trace(target: _Target, *, example_inputs: Any, batch_size: int, seq_len: int, backward: bool,
           optimizer_step: bool, generate: bool, max_new_tokens: int) -> tuple[nn.Module, Any, OpRecorder]:
    """One recorded run of the target: the module, its inputs and the recorder holding its ops."""
    with ExitStack() as stack:
        stack.enter_context(_portable_kernels())
        module = target.build()
        if target.fake_mode is not None:
            stack.enter_context(target.fake_mode)
            stack.enter_context(_MetaShapes())
            module = _fake_parameters(module)
        inputs = _inputs(target, module, example_inputs, batch_size, seq_len, backward)
        stack.enter_context(_preserved(module, backward))
        recorder = stack.enter_context(OpRecorder(module))
        _forward(recorder, module, inputs, backward, optimizer_step)
        if generate:
            _generate(recorder, module, inputs, max_new_tokens)
    return module, inputs, recorder


@dataclass
class _Target:
    """What is audited: a live module, or a config to build (weightless inside a FakeTensorMode)."""

    name: str
    weights: str  # "module" (its own), "random" (built from the config), "none" (weightless)
    module: nn.Module | None
    config: PretrainedConfig | None
    dtype: torch.dtype
    tokenizer: Any = None
    trust_remote_code: bool = False
    processor: dict[str, Any] | None = None
    fake_mode: FakeTensorMode | None = None
    retraced: str | None = None  # why a weightless trace gave way to one on random weights

    @classmethod
    def resolve(cls, model: Any, weightless: bool | None, generate: bool, dtype: torch.dtype,
                trust_remote_code: bool) -> _Target:
        if isinstance(model, nn.Module):
            if weightless:
                raise NeuronkitInputError("weightless=True needs a MODEL spec or config, not a built module")
            return cls(type(model).__name__, "module", model, getattr(model, "config", None), dtype)
        processor = None
        if isinstance(model, PretrainedConfig):
            name, config, tokenizer = f"{model.model_type} config", model, None
        elif isinstance(model, (str, os.PathLike)):
            name = str(model)
            config = models.load_config(model, trust_remote_code=trust_remote_code)
            tokenizer = models.load_tokenizer(model, trust_remote_code=trust_remote_code)
            processor = example.processor_config(model)
        else:
            raise NeuronkitInputError(
                f"cannot audit a {type(model).__name__}: pass an nn.Module, a config, or a MODEL spec")
        if weightless is None:
            weightless = not generate
        if weightless and generate:
            raise NeuronkitInputError("generate=True cannot run weightless: its stopping logic reads values; "
                                      "pass weightless=False to run it on random weights")
        if not weightless:
            module = models.load_model(config, dtype, weights=False, trust_remote_code=trust_remote_code)
            return cls(name, "random", module, config, dtype, tokenizer, trust_remote_code, processor)
        return cls(name, "none", None, config, dtype, tokenizer, trust_remote_code, processor,
                   FakeTensorMode(shape_env=ShapeEnv(), static_shapes=True))

    def on_random_weights(self, model: Any, stopped: BaseException) -> _Target:
        """This target on random weights, after its weightless trace `stopped`: the model's Python reads a
        tensor value (a branch on a data-dependent size, a loop over the experts a batch routes to) or runs
        an op fake tensors cannot give a shape to. Refused in one line when the model does not fit memory."""
        where, why = _user_frame(stopped), f"{type(stopped).__name__}: {first_line(stopped)}"
        try:
            target = _Target.resolve(self.config if self.config is not None else model, False, False, self.dtype,
                                     self.trust_remote_code)
        except NeuronkitInputError as exc:
            raise NeuronkitInputError(f"the weightless audit of {self.name} stops at {where} ({why}), and the "
                                      f"model does not fit memory on random weights: {exc}") from None
        target.name, target.tokenizer, target.processor = self.name, self.tokenizer, self.processor
        target.retraced = f"the weightless trace stopped at {where} ({why})"
        return target

    def build(self) -> nn.Module:
        """The module; built from the config when weightless (inside the fake mode, so no storage)."""
        if self.module is None:
            assert self.config is not None
            cls = models.model_class(self.config)
            if self.fake_mode is None:
                self.module = models.build(cls, self.config, dtype=self.dtype).eval()
            else:
                # Parameters on the meta device, nothing initialised (some initialisers read values,
                # e.g. trunc_normal_'s resampling); everything else a constructor computes (ConvNeXt's
                # drop-path rates from torch.linspace) runs on real CPU tensors, as it must.
                from accelerate import init_empty_weights
                from transformers.initialization import no_init_weights

                with init_empty_weights(), no_init_weights():
                    self.module = models.build(cls, self.config, dtype=self.dtype).eval()
        return self.module

    def describe(self, module: nn.Module, inputs: Any, phases: list[str], dtype: torch.dtype) -> AuditedModel:
        config = self.config
        params = list(module.parameters())
        architectures = getattr(config, "architectures", None) or [type(module).__name__]
        return AuditedModel(
            name=self.name,
            module_class=type(module).__name__,
            architecture=architectures[0],
            model_type=getattr(config, "model_type", None),
            num_parameters=sum(p.numel() for p in params),
            dtype=str(params[0].dtype if params else dtype).removeprefix("torch."),
            weightless=self.weights == "none",
            weights=self.weights,
            inputs={k: list(v.shape) for k, v in _named(inputs).items()},
            phases=phases,
            retraced=self.retraced,
        )


def _fake_parameters(module: nn.Module) -> nn.Module:
    """The meta-device module with fake CPU parameters and buffers (call inside the fake mode): shapes and
    dtypes, no storage. Like `to_empty(device="cpu")`, whose `empty_like` the fake mode refuses for a real
    meta tensor; it makes one parameter per module, so the ties are made again."""
    module._apply(lambda t: torch.empty(t.shape, dtype=t.dtype, device="cpu"))
    if hasattr(module, "tie_weights"):
        module.tie_weights()
    return module


def _inputs(target: _Target, module: nn.Module, example_inputs: Any, batch_size: int, seq_len: int,
            backward: bool) -> Any:
    if example_inputs is None:
        if target.config is None:
            raise NeuronkitInputError(f"example_inputs are needed to audit a {type(module).__name__}")
        example_inputs = example.in_dtype(example.example_inputs(target.config, target.tokenizer, batch_size, seq_len,
                                                                 processor=target.processor), target.dtype)
        if not backward:
            example_inputs.pop("labels", None)  # an inference audit: no loss
        if target.fake_mode is not None:
            # All ones, i.e. no padding. A real run sees that and takes the mask-free path; a fake
            # tensor has no values to show it, so leave it out to take that same path.
            example_inputs.pop("attention_mask", None)
    if target.fake_mode is not None:
        fake = target.fake_mode
        return tree_map_only(torch.Tensor, lambda t: fake.from_tensor(t, static_shapes=True), example_inputs)
    device = next((p.device for p in module.parameters()), None)
    if device is not None and device.type != "cpu":  # a model already on the device: inputs go there too
        example_inputs = tree_map_only(torch.Tensor, lambda t: t.to(device), example_inputs)
    return example_inputs


def _forward(recorder: OpRecorder, module: nn.Module, inputs: Any, backward: bool, optimizer_step: bool) -> None:
    recorder.label_autograd = backward
    with torch.set_grad_enabled(backward):
        output = call(module, inputs)
    if not backward:
        return
    with recorder.paused():
        loss = _loss(output)
    with recorder.scope(BACKWARD, backward=True):
        loss.backward()
    if optimizer_step:
        with recorder.paused():
            optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=0.0,
                                          fused=True)
        with recorder.scope(OPTIMIZER):
            optimizer.step()


def _loss(output: Any) -> torch.Tensor:
    """The loss the parity checks train on (`compare.loss_of`: the model's own, else the surrogate); imported
    here, as `neuronkit.graph_compile` registers the compile backend, which an audit does not need."""
    from neuronkit.graph_compile.compare import loss_of

    try:
        return loss_of(output)
    except ValueError:
        raise NeuronkitInputError("backward=True needs an output that requires grad (no floating-point output "
                                  "does)") from None


def _generate(recorder: OpRecorder, module: nn.Module, inputs: Any, max_new_tokens: int) -> None:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise NeuronkitInputError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    can_generate = getattr(module, "can_generate", None)
    if not (callable(can_generate) and can_generate()):
        raise NeuronkitInputError(f"generate=True needs a generative model; {type(module).__name__} is not one")
    with recorder.scope(GENERATE):
        greedy(module, generation_prompt(_named(inputs)), max_new_tokens, exact_length=True)


class _MetaShapes(TorchDispatchMode):
    """Output shapes for ops whose meta kernel is stricter than the kernels that run them.

    PyTorch's meta `_grouped_mm` copies the CUDA kernel's bf16-only check (torch/_meta_registrations.py
    `_meta_grouped_mm_common`), while the CPU kernel and the device take float32 too; a weightless audit
    of an MoE model in float32 would stop there. Its output shape does not depend on the dtype, so it is
    taken from a bf16 call and given the inputs' dtype. Entered inside the fake mode, under the recorder,
    which has recorded the op as the model issued it."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.ops.aten._grouped_mm.default and args[0].dtype != torch.bfloat16:
            narrow = [a.to(torch.bfloat16) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                      for a in args]
            return func(*narrow, **kwargs).to(args[0].dtype)
        return func(*args, **kwargs)


@contextmanager
def _portable_kernels() -> Iterator[None]:
    """CPU-only oneDNN kernels (`mkldnn_rnn_layer`, ...) never exist on the device: take the portable
    paths a device backend gets while recording."""
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = enabled


@contextmanager
def _preserved(module: nn.Module, backward: bool) -> Iterator[None]:
    """Train mode for a backward audit, eval otherwise; the module's mode and gradients restored after."""
    was_training = module.training
    grads = {p: p.grad for p in module.parameters()}
    module.train(backward)
    try:
        yield
    finally:
        module.train(was_training)
        for param, grad in grads.items():
            param.grad = grad


def _named(value: Any) -> dict[str, torch.Tensor]:
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if isinstance(v, torch.Tensor)}
    values = value if isinstance(value, (tuple, list)) else [value]
    return {f"arg{i}": t for i, t in enumerate(values) if isinstance(t, torch.Tensor)}


def _user_frame(error: BaseException) -> str:
    """Where `error` was raised in the model's code: the innermost frame outside torch and the recorder
    (`transformers/models/deberta_v2/modeling_deberta_v2.py:1062 in forward`)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not any(part in f.filename for part in _INTERNALS)]
    if not frames:
        return "an op"
    frame = frames[-1]
    path = frame.filename.split("site-packages/", 1)[-1]
    return f"{path}:{frame.lineno} in {frame.name}"


def _versions() -> dict[str, str]:
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "neuronkit": neuronkit.__version__, "op_support": str(load_policy().meta.get("version", ""))}
