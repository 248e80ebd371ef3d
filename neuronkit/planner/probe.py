"""Measure what one transformer layer costs each rank, with PyTorch's own parallel APIs on a fake group.

PyTorch's fake process group lets one process act as rank 0 of any world size: collectives return at
once and move nothing. On it, the real `parallelize_module` (tensor parallel) and `fully_shard` (FSDP2)
shard a copy of the model on the meta device, so each rank's parameter bytes are the ones PyTorch
itself would allocate, padding and uneven splits included. A forward and backward under FakeTensorMode
(no storage) then measures the activations autograd saves and the tensor-parallel collectives PyTorch
issues. Copies with one and with two layers give per-layer figures by difference, so attention,
MLP, embeddings and loss are measured, not modelled.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.distributed as dist
import torch.testing._internal.distributed.fake_pg  # noqa: F401 - registers PyTorch's "fake" backend
from torch import nn
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import PretrainedConfig

from neuronkit import models, slicing
from neuronkit.errors import NeuronkitInputError
from neuronkit.pipeline.record import first_line

# The tasks (neuronkit.models.TASKS) whose training step the probe can run: token ids in, per-token logits out.
PLANNED_TASKS = ("causal_lm", "masked_lm")
# Tensor-parallel styles by the last name of a layer's Linear modules: the Megatron split that
# TorchTitan's Llama plan and the Oct docs' TP tutorial use (column-parallel into attention and the MLP,
# row-parallel out of them, so each half costs one all-reduce).
_COLWISE = frozenset({"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"})
_ROWWISE = frozenset({"o_proj", "down_proj"})
TP_SPLIT = _COLWISE | _ROWWISE  # the Linear names a tensor-parallel plan splits
# The functional collectives `_CollectiveLog` counts, by the kind `neuronkit.planner.plan.RING_FACTOR` prices.
_COLLECTIVES = {"all_reduce": "all_reduce", "all_gather_into_tensor": "all_gather",
                "reduce_scatter_tensor": "reduce_scatter", "all_to_all_single": "all_to_all"}


@dataclass(frozen=True, slots=True)
class Shards:
    """Per-rank parameter bytes of one layer and of everything outside the layer stack."""

    layer: int  # one layer's bytes on this rank after every sharding
    layer_tp: int  # one layer's bytes after tensor parallel only: what an FSDP all-gather rebuilds
    embedding: int  # input embeddings (the first pipeline stage holds them)
    head: int  # everything else outside the layers: final norm, LM head (the last stage)
    head_tp: int
    embedding_tp: int
    replicated_in_layer: int  # parameters of a layer the TP plan does not split (kept whole per tp rank)


@dataclass(frozen=True, slots=True)
class Traffic:
    """Activations saved for backward and TP collectives, per layer and outside the layers."""

    layer_saved: int
    outside_saved: int
    layer_collectives: dict[tuple[str, str], tuple[int, int]]  # (kind, phase) -> (calls, bytes)
    outside_collectives: dict[tuple[str, str], tuple[int, int]]


class LayerProbe:
    """A model config cut down to one and two layers, measured per (tp, fsdp, dp) layout."""

    def __init__(self, config: PretrainedConfig, dtype: torch.dtype) -> None:
        if not isinstance(getattr(config, "num_hidden_layers", None), int):
            raise NeuronkitInputError(
                f"cannot plan {config.model_type!r}: the planner handles decoder or encoder stacks with "
                "num_hidden_layers in config.json")
        task = models.task_of(config)
        if task not in PLANNED_TASKS and not (task == "base" and not config.is_encoder_decoder):
            # the probe trains on token ids with a per-token loss (a decoder or encoder stack's hidden states too)
            raise NeuronkitInputError(
                f"cannot plan {config.architectures[0] if config.architectures else config.model_type}: the planner "
                f"plans causal and masked language models and their base stacks (token ids in, per-token outputs), "
                f"not {task}")
        self.config = config
        self.dtype = dtype
        self.cls = models.model_class(config)
        self.num_layers = config.num_hidden_layers
        self.tied = bool(getattr(config, "tie_word_embeddings", False))
        self.extras: dict[str, bool] = {}  # keyword arguments of the probes' forward

    def check_tp(self, tp: int) -> None:
        """Raise when `tp` cannot split this model's attention heads, naming the constraint."""
        if tp == 1:
            return
        heads = getattr(self.config, "num_attention_heads", None)
        kv = getattr(self.config, "num_key_value_heads", None) or heads
        for name, count in (("num_attention_heads", heads), ("num_key_value_heads", kv)):
            if not isinstance(count, int) or count % tp:
                raise NeuronkitInputError(f"tp={tp} does not divide the model's {name} ({count})")
        with torch.device("meta"):
            layer = layer_stack(self._build(1))[0]
        if not any(_leaf(n) in _COLWISE for n, m in layer.named_modules() if isinstance(m, nn.Linear)):
            raise NeuronkitInputError(
                f"no tensor-parallel plan for {type(layer).__name__}: the planner splits Llama-style "
                "q/k/v/o and gate/up/down projections; use tp=1")

    @functools.lru_cache(maxsize=None)
    def shards(self, tp: int, fsdp: int, dp: int) -> Shards:
        """Per-rank parameter bytes under tensor parallel `tp`, FSDP2 over `fsdp` and `dp` replicas."""
        with _fake_world(dp, fsdp, tp) as mesh:
            with torch.device("meta"):
                model = self._build(1)
            embedding = model.get_input_embeddings()
            layer = layer_stack(model)[0]
            replicated = sum(_nbytes(p) for n, p in layer.named_parameters()
                             if _leaf(n.rsplit(".", 1)[0]) not in TP_SPLIT) if tp > 1 else 0
            self._tensor_parallel(model, mesh["tp"], tp)
            tp_bytes = _split(model, layer, embedding)
            if fsdp > 1:
                shard_mesh = mesh["dp", "fsdp"] if dp > 1 else mesh["fsdp"]
                fully_shard(layer, mesh=shard_mesh)
                fully_shard(model, mesh=shard_mesh)
            local = _split(model, layer, embedding)
        return Shards(layer=local[0], layer_tp=tp_bytes[0], embedding=local[1], head=local[2],
                      embedding_tp=tp_bytes[1], head_tp=tp_bytes[2], replicated_in_layer=replicated)

    @functools.lru_cache(maxsize=None)
    def traffic(self, tp: int, batch: int, seq_len: int) -> Traffic:
        """Saved activations and TP collectives of one training forward+backward, per layer and outside."""
        one = self._forward_backward(1, tp, batch, seq_len)
        two = self._forward_backward(2, tp, batch, seq_len)
        per_layer = {k: (two[1][k][0] - one[1].get(k, (0, 0))[0], two[1][k][1] - one[1].get(k, (0, 0))[1])
                     for k in two[1]}
        per_layer = {k: v for k, v in per_layer.items() if v[0] > 0}
        outside = {k: (v[0] - per_layer.get(k, (0, 0))[0], v[1] - per_layer.get(k, (0, 0))[1])
                   for k, v in one[1].items()}
        outside = {k: v for k, v in outside.items() if v[0] > 0}
        layer_saved = two[0] - one[0]
        return Traffic(layer_saved=layer_saved, outside_saved=one[0] - layer_saved,
                       layer_collectives=per_layer, outside_collectives=outside)

    def _forward_backward(self, layers: int, tp: int, batch: int, seq_len: int
                          ) -> tuple[int, dict[tuple[str, str], tuple[int, int]]]:
        try:
            try:
                return self._fake_step(layers, tp, batch, seq_len, self.extras)
            except ValueError as exc:
                if self.extras or isinstance(exc, NeuronkitInputError) or getattr(self.config, "use_cache", None) is None:
                    raise
                # A hybrid model cut to blocks without an attention layer (Qwen3-Next's or Zamba2's first block:
                # linear attention, Mamba) makes a KV cache transformers cannot build a causal mask from, on any
                # device. A training step reads no cache: this model is measured without one, in every probe.
                # (Not by default: on fake tensors transformers cannot rule out packed sequences without a
                # cache, and adds their mask.)
                self.extras = {"use_cache": False}
                return self._fake_step(layers, tp, batch, seq_len, self.extras)
        except (DataDependentOutputException, DynamicOutputShapeException, GuardOnDataDependentSymNode) as exc:
            raise NeuronkitInputError(
                f"cannot measure {self.cls.__name__} with fake tensors: building or training it reads tensor values "
                f"({first_line(exc)}); pass --global-batch N for the cost model's estimate instead") from None

    def _fake_step(self, layers: int, tp: int, batch: int, seq_len: int, extras: dict[str, bool]
                   ) -> tuple[int, dict[tuple[str, str], tuple[int, int]]]:
        """Saved bytes and collectives of one training step of `layers` blocks, on fake tensors."""
        with _fake_world(1, 1, tp) as mesh:
            tp_mesh = mesh["tp"]
            with FakeTensorMode(allow_non_fake_inputs=True):
                model = self._build(layers).train()
                self._tensor_parallel(model, tp_mesh, tp)
                params = {_storage(p)._cdata for p in model.parameters()}
                saved = _SavedBytes(params)
                ids = torch.zeros(batch, seq_len, dtype=torch.long)
                with _CollectiveLog() as log, torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
                    logits = _logits(model(input_ids=ids, **extras))
                    loss = nn.functional.cross_entropy(logits.float().flatten(0, -2), ids.flatten())
                log.phase = "backward"
                with log:
                    loss.backward()
        return saved.total, dict(log.calls)

    def _build(self, layers: int) -> nn.Module:
        config = copy.deepcopy(self.config)
        config.num_hidden_layers = layers
        for key in slicing.stored_per_layer_keys(config):
            if isinstance(value := getattr(config, key), list):
                setattr(config, key, value[:layers])
        return models.build(self.cls, config, dtype=self.dtype)

    def _tensor_parallel(self, model: nn.Module, mesh: DeviceMesh, tp: int) -> None:
        if tp == 1:
            return
        for layer in layer_stack(model):
            plan = {name: ColwiseParallel() if _leaf(name) in _COLWISE else RowwiseParallel()
                    for name, m in layer.named_modules()
                    if isinstance(m, nn.Linear) and _leaf(name) in TP_SPLIT}
            parallelize_module(layer, mesh, plan)
        if not self.tied:  # TorchTitan's split of embeddings and head; tied ones stay whole
            parallelize_module(model.get_input_embeddings(), mesh, RowwiseParallel(input_layouts=Replicate()))
            head = model.get_output_embeddings()
            if isinstance(head, nn.Linear):
                parallelize_module(head, mesh, ColwiseParallel(output_layouts=Replicate()))


def layer_stack(model: nn.Module) -> nn.ModuleList:
    """The model's stack of transformer layers: its first ModuleList of non-Linear modules."""
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) and not isinstance(module[0], nn.Linear):
            return module
    raise NeuronkitInputError(f"cannot find the layer stack of {type(model).__name__}")


@contextlib.contextmanager
def _fake_world(dp: int, fsdp: int, tp: int) -> Iterator[DeviceMesh]:
    """A fake process group of dp*fsdp*tp ranks (this process is rank 0) and its (dp, fsdp, tp) mesh."""
    if dist.is_initialized():
        raise NeuronkitInputError("plan needs a process without a process group (it runs its own fake one)")
    dist.init_process_group("fake", store=dist.HashStore(), rank=0, world_size=dp * fsdp * tp)
    try:
        yield init_device_mesh("cpu", (dp, fsdp, tp), mesh_dim_names=("dp", "fsdp", "tp"))
    finally:
        dist.destroy_process_group()


def _leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _nbytes(p: torch.Tensor) -> int:
    local = p.to_local() if isinstance(p, DTensor) else p
    return local.numel() * local.element_size()


def _split(model: nn.Module, layer: nn.Module, embedding: nn.Module) -> tuple[int, int, int]:
    """(one layer, input embeddings, the rest) bytes on this rank, by parameter name (sharding replaces
    the Parameter objects but keeps their names)."""
    names = {m: n + "." for n, m in model.named_modules()}
    layer_prefix, embedding_prefix = names[layer], names[embedding]
    totals = [0, 0, 0]
    for name, p in model.named_parameters():
        where = 0 if name.startswith(layer_prefix) else 1 if name.startswith(embedding_prefix) else 2
        totals[where] += _nbytes(p)
    return totals[0], totals[1], totals[2]


def _storage(t: torch.Tensor) -> torch.UntypedStorage:
    return (t._local_tensor if isinstance(t, DTensor) else t).untyped_storage()


def _logits(output: object) -> torch.Tensor:
    logits = getattr(output, "logits", None)
    if logits is None:
        logits = getattr(output, "last_hidden_state")
    return logits.full_tensor() if isinstance(logits, DTensor) else logits


class _SavedBytes:
    """Bytes of the tensors autograd saves for backward, each storage once, parameters excluded."""

    def __init__(self, params: set[int]) -> None:
        self.seen = set(params)
        self.total = 0

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        storage = _storage(t)
        if storage._cdata not in self.seen:
            self.seen.add(storage._cdata)
            self.total += storage.nbytes()
        return t

    @staticmethod
    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t


class _CollectiveLog(TorchDispatchMode):
    """Counts the functional collectives PyTorch issues, with their payload bytes, by phase."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.calls: dict[tuple[str, str], tuple[int, int]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.namespace in ("_c10d_functional", "c10d_functional"):
            kind = _COLLECTIVES.get(func._schema.name.split("::")[-1])
            if kind is not None:
                payload = out if kind == "all_gather" else args[0]
                key = (kind, self.phase)
                calls, nbytes = self.calls.get(key, (0, 0))
                self.calls[key] = (calls + 1, nbytes + payload.numel() * payload.element_size())
        return out
