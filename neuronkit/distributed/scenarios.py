"""Short distributed training runs on simulated cores, each checked against one process on the CPU.

Run by every rank of a torchrun job (`python -m torch.distributed.run ... -m neuronkit.distributed.scenarios
--out DIR ddp fsdp2 ...`, or `neuronkit.distributed.launch.run`). Each scenario trains or computes on
`neuron:<local rank>` through the `neuron` process group, repeats the same computation unsharded on the CPU
in the same process, and returns the largest difference. Rank results go to `DIR/rank<R>.json`.

Models: the bundled tiny-qwen3 (Hugging Face Qwen3, 2 layers, hidden 64) for DDP, FSDP2 and tensor
parallel, since that is what a team migrates; a two-layer MLP for sequence parallel and pipeline parallel,
where the HF decoder layer's keyword inputs (position embeddings, masks) would need a model-specific input
plan and stage split that say nothing about the device, and for FSDP2+TP on four ranks, whose 2-D mesh
composes the two layouts the Qwen3 runs check one by one (a rank that trains only the MLP does not import
transformers: seconds per rank).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

STEPS = 2
LR = 0.1
BATCH, SEQ = 4, 16  # global batch: sequences x tokens


def _device() -> torch.device:
    return torch.device("neuron", torch.neuron.current_device())


MODEL = "tiny-qwen3"  # --model: a causal LM (checkpoint directory, config.json or bundled name)


def _model() -> nn.Module:
    """The model, in float32 with its checkpoint's weights (random ones if it has none), seeded alike on
    every rank and in the CPU reference."""
    from neuronkit.models import has_weights, load_model
    torch.manual_seed(0)
    return load_model(MODEL, weights=has_weights(MODEL)).train()


def _vocab() -> int:
    from neuronkit.models import load_config
    return load_config(MODEL).vocab_size


def _blocks(model: nn.Module) -> list[nn.Module]:
    """The repeated layers FSDP2 shards one by one: the classes Hugging Face never splits across devices."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    return [m for m in model.modules() if type(m).__name__ in names]


def _batch(vocab: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randint(vocab, (BATCH, SEQ), generator=generator)


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.detach().cpu().float() - b.detach().cpu().float()).abs().max().item()


def _train(model: nn.Module, tokens: torch.Tensor, steps: int = STEPS,
           tp_group: dist.ProcessGroup | None = None) -> list[float]:
    """SGD steps of causal-LM loss; the losses seen."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, foreach=False)  # TP mixes DTensor and plain params
    losses = []
    for _ in range(steps):
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        if tp_group is not None:
            _sum_head_norm_grads(model, tp_group)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def _sum_head_norm_grads(model: nn.Module, tp_group: dist.ProcessGroup) -> None:
    """Qwen3's q_norm/k_norm weights are replicated but see only this rank's heads under tensor parallel,
    so each rank holds part of their gradient: sum it over the tensor-parallel group (as on any device)."""
    for name, param in model.named_parameters():
        if param.grad is not None and name.endswith(("q_norm.weight", "k_norm.weight")):
            grad = param.grad
            dist.all_reduce(grad.to_local() if hasattr(grad, "to_local") else grad, group=tp_group)


def _reference(tokens: torch.Tensor) -> tuple[nn.Module, list[float]]:
    """One process on the CPU: the same model and the whole batch."""
    model = _model()
    return model, _train(model, tokens)


def _full(tensor: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def _param_diff(model: nn.Module, reference: nn.Module) -> float:
    ref = dict(reference.named_parameters())
    return max(_diff(_full(p), _full(ref[name])) for name, p in model.named_parameters())


def _local_slice(tokens: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    return tokens.chunk(world)[rank]


def ddp() -> dict[str, Any]:
    """DistributedDataParallel: each rank trains on its slice of the batch; parameters match the CPU."""
    from torch.nn.parallel import DistributedDataParallel
    rank, world = dist.get_rank(), dist.get_world_size()
    tokens = _batch(_vocab())
    reference, ref_losses = _reference(tokens)
    model = DistributedDataParallel(_model().to(_device()), device_ids=[torch.neuron.current_device()])
    losses = _train(model, _local_slice(tokens, rank, world).to(_device()))
    # A communication hook (Future.then on the collective's future) fails as S's own DDP tests record it
    # (tests/pytorch_tests/specs/ddp_spec.json:113,149: no stream from the pool for the callback).
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    hooked = DistributedDataParallel(_model().to(_device()), device_ids=[torch.neuron.current_device()])
    hooked.register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
    try:
        _train(hooked, _local_slice(tokens, rank, world).to(_device()))
        hook_error = None
    except RuntimeError as exc:
        hook_error = str(exc).splitlines()[0]
    return {"param_diff": _param_diff(model.module, reference), "losses": losses, "reference_losses": ref_losses,
            "comm_hook_error": hook_error}


def fsdp2() -> dict[str, Any]:
    """fully_shard per decoder layer and at the root: each rank holds 1/world of the parameters."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    rank, world = dist.get_rank(), dist.get_world_size()
    tokens = _batch(_vocab())
    reference, ref_losses = _reference(tokens)
    mesh = init_device_mesh("neuron", (world,))
    model = _model()
    full_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    index = torch.neuron.current_device()
    before = torch.neuron.memory_allocated(index)
    for block in _blocks(model):
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    sharded = torch.neuron.memory_allocated(index) - before
    local_bytes = sum(p.to_local().numel() * p.element_size() for p in model.parameters())
    losses = _train(model, _local_slice(tokens, rank, world).to(_device()))
    return {"param_diff": _param_diff(model, reference), "losses": losses, "reference_losses": ref_losses,
            "full_param_bytes": full_bytes, "local_param_bytes": local_bytes, "device_bytes_after_shard": sharded,
            "peak_bytes": torch.neuron.max_memory_allocated(index)}


def fsdp1() -> dict[str, Any]:
    """FullyShardedDataParallel (FSDP1; Accelerate's default FSDP plugin wraps it) per decoder layer and at
    the root: its unshard/reshard streams are the device module's, and it calls `tensor.record_stream` on them
    (torch/distributed/fsdp/_common_utils.py `_no_dispatch_record_stream`), which the device takes as S's
    does (csrc/aten/RecordStream.cpp); parameters match the CPU."""
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    rank, world = dist.get_rank(), dist.get_world_size()
    tokens = _batch(_vocab())
    reference, ref_losses = _reference(tokens)
    model = _model()
    policy = ModuleWrapPolicy({type(block) for block in _blocks(model)})
    model = FullyShardedDataParallel(model, auto_wrap_policy=policy, device_id=_device(), use_orig_params=True)
    losses = _train(model, _local_slice(tokens, rank, world).to(_device()))
    ref = dict(reference.named_parameters())
    with FullyShardedDataParallel.summon_full_params(model):
        diff = max(_diff(p, ref[name.replace("_fsdp_wrapped_module.", "")])
                   for name, p in model.named_parameters())
    return {"param_diff": diff, "losses": losses, "reference_losses": ref_losses}


def _tp_plan(prefix: str = "") -> dict[str, Any]:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    plan: dict[str, Any] = {}
    for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
        plan[prefix + name] = ColwiseParallel()
    for name in ("self_attn.o_proj", "mlp.down_proj"):
        plan[prefix + name] = RowwiseParallel()
    return plan


def tensor_parallel() -> dict[str, Any]:
    """Colwise q/k/v/gate/up and rowwise o/down in every decoder layer; every rank sees the whole batch."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module
    tokens = _batch(_vocab())
    reference, ref_losses = _reference(tokens)
    mesh = init_device_mesh("neuron", (dist.get_world_size(),), mesh_dim_names=("tp",))
    model = _model().to(_device())
    for layer in _blocks(model):
        parallelize_module(layer, mesh, _tp_plan())
    losses = _train(model, tokens.to(_device()), tp_group=mesh.get_group())
    return {"param_diff": _param_diff(model, reference), "losses": losses, "reference_losses": ref_losses}


class _MLP(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return _MLP()


def sequence_parallel() -> dict[str, Any]:
    """SequenceParallel LayerNorm on sequence shards, then colwise/rowwise linears (the Megatron layout)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )
    rank, world = dist.get_rank(), dist.get_world_size()
    x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(1))
    reference = _mlp()
    ref_out = reference(x)
    ref_out.sum().backward()
    mesh = init_device_mesh("neuron", (world,))
    model = _mlp().to(_device())
    parallelize_module(model, mesh, {
        "norm": SequenceParallel(),
        "up": ColwiseParallel(input_layouts=Shard(1)),
        "down": RowwiseParallel(output_layouts=Shard(1)),
    })
    local_x = x.chunk(world, dim=1)[rank].to(_device())
    out = model(local_x)
    out.sum().backward()
    grads = max(_diff(_full(p.grad), dict(reference.named_parameters())[n].grad)
                for n, p in model.named_parameters())
    return {"output_diff": _diff(out, ref_out.chunk(world, dim=1)[rank]), "grad_diff": grads}


def fsdp2_tp() -> dict[str, Any]:
    """A 2-D mesh (dp, tp) over the MLP: tensor parallel inside each pair of ranks (colwise up, rowwise down),
    FSDP2 across pairs; SGD steps on this pair's slice of the batch against the whole batch on the CPU."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    world = dist.get_world_size()
    mesh = init_device_mesh("neuron", (world // 2, 2), mesh_dim_names=("dp", "tp"))
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(6))
    reference = _mlp()
    ref_losses = _train_mlp(reference, x)
    model = _mlp().to(_device())
    parallelize_module(model, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    losses = _train_mlp(model, _local_slice(x, mesh["dp"].get_local_rank(), world // 2).to(_device()))
    return {"param_diff": _param_diff(model, reference), "losses": losses, "reference_losses": ref_losses}


def _train_mlp(model: nn.Module, x: torch.Tensor, steps: int = STEPS) -> list[float]:
    """SGD steps on the mean square of the MLP's output; the losses seen."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, foreach=False)
    losses = []
    for _ in range(steps):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def pipeline() -> dict[str, Any]:
    """Two pipeline stages (one MLP block each), GPipe over 2 micro-batches: activations go by send/recv."""
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    blocks = [_MLP() for _ in range(world)]
    reference = nn.Sequential(*copy.deepcopy(blocks))
    x = torch.randn(4, 8, 32, generator=torch.Generator().manual_seed(2))
    target = torch.randn(4, 8, 32, generator=torch.Generator().manual_seed(3))

    def loss_fn(out: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(out, tgt)

    ref_loss = loss_fn(reference(x), target)
    ref_loss.backward()
    stage_module = blocks[rank].to(_device())
    stage = PipelineStage(stage_module, rank, world, _device())
    schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss_fn)
    losses: list[torch.Tensor] = []
    if rank == 0:
        schedule.step(x.to(_device()))
    elif rank == world - 1:
        schedule.step(target=target.to(_device()), losses=losses)
    else:
        schedule.step()
    ref_grads = dict(reference[rank].named_parameters())
    # GPipe scales the summed micro-batch gradients by 1/n_microbatches: the gradient of the mean loss.
    grad_diff = max(_diff(p.grad, ref_grads[n].grad) for n, p in stage_module.named_parameters())
    result: dict[str, Any] = {"grad_diff": grad_diff}
    if losses:
        result["loss_diff"] = abs(torch.stack(losses).mean().item() - ref_loss.item())
    return result


def dtensor_ops() -> dict[str, Any]:
    """DTensor: shard, matmul, redistribute and reduce, compared with the same ops on whole CPU tensors."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    mesh = init_device_mesh("neuron", (dist.get_world_size(),))
    a = torch.randn(8, 6, generator=torch.Generator().manual_seed(4))
    b = torch.randn(6, 4, generator=torch.Generator().manual_seed(5))
    da = distribute_tensor(a.to(_device()), mesh, [Shard(0)])
    db = distribute_tensor(b.to(_device()), mesh, [Replicate()])
    product = da @ db
    diffs = {
        "matmul": _diff(product.full_tensor(), a @ b),
        "redistribute": _diff(product.redistribute(mesh, [Replicate()]).to_local(), a @ b),
        "sum": _diff(product.sum().full_tensor(), (a @ b).sum()),
        "softmax": _diff(product.softmax(dim=1).full_tensor(), (a @ b).softmax(dim=1)),
    }
    try:  # Shard(0) -> Shard(1) is an all_to_all, which the device refuses between 2 processes
        product.redistribute(mesh, [Shard(1)])
        reshard_error = ""
    except RuntimeError as exc:
        reshard_error = str(exc)
    return {"max_diff": max(diffs.values()), "diffs": diffs, "local_device": str(da.to_local().device),
            "shard_to_shard_error": reshard_error}


def checkpoint() -> dict[str, Any]:
    """torch.distributed.checkpoint: save an FSDP2 model's sharded state, load it into a fresh one."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("neuron", (dist.get_world_size(),))
    path = Path(os.environ["NEURONKIT_SCENARIO_OUT"]) / "dcp"

    def sharded(seed: int) -> nn.Module:
        torch.manual_seed(seed)
        model = _MLP()
        fully_shard(model, mesh=mesh)
        return model

    saved = sharded(0)
    dcp.save(saved.state_dict(), checkpoint_id=str(path))
    loaded = sharded(1)
    before = _param_diff(loaded, saved)
    state = loaded.state_dict()
    dcp.load(state, checkpoint_id=str(path))
    loaded.load_state_dict(state)
    return {"diff_before_load": before, "param_diff": _param_diff(loaded, saved),
            "files": sorted(p.name for p in path.iterdir())}


def collectives() -> dict[str, Any]:
    """Every collective once, with the bytes the profiler records for each."""
    from neuronkit.device.process_group.trace import collective_events
    rank, world = dist.get_rank(), dist.get_world_size()
    device = _device()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        t = torch.full((4,), float(rank + 1), device=device)
        dist.all_reduce(t)
        gathered = torch.empty(4 * world, device=device)
        dist.all_gather_into_tensor(gathered, t)
        scattered = torch.empty(2, device=device)
        dist.reduce_scatter_tensor(scattered, torch.arange(2.0 * world, device=device))
        dist.broadcast(t, 0)
        dist.barrier()
    expected = world * (world + 1) / 2
    average = torch.full((2,), float(rank), device=device)
    dist.all_reduce(average, op=dist.ReduceOp.AVG)
    pieces = [torch.full((2,), float(i), device=device) for i in range(world)] if rank == 0 else None
    piece = torch.empty(2, device=device)
    dist.scatter(piece, pieces, src=0)
    collected = [torch.empty(2, device=device) for _ in range(world)] if rank == 0 else None
    dist.gather(piece * 10, collected, dst=0)
    objects: list[Any] = [None] * world
    dist.all_gather_object(objects, {"rank": rank})
    return {"all_reduce_ok": bool((t.cpu() == expected).all()),
            "all_gather": gathered.cpu().tolist(), "reduce_scatter": scattered.cpu().tolist(),
            "all_reduce_avg": average.cpu().tolist(), "scatter": piece.cpu().tolist(),
            "gather": [c.cpu().tolist() for c in collected] if collected else None, "objects": objects,
            "profiled": collective_events(prof)}


def all_to_all() -> dict[str, Any]:
    """all_to_all with equal chunks, then with split sizes the device refuses (needs 4 ranks)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    sent = torch.arange(world * 2, dtype=torch.float32, device=_device()) + 100 * rank
    received = torch.empty_like(sent)
    dist.all_to_all_single(received, sent)
    expected = torch.cat([torch.arange(2 * rank, 2 * rank + 2, dtype=torch.float32) + 100 * src
                          for src in range(world)])
    try:
        dist.all_to_all_single(received, sent, [2] * world, [2] * world)
        split_error = ""
    except NotImplementedError as exc:
        split_error = str(exc)
    return {"diff": _diff(received, expected), "split_error": split_error}


def compiled() -> dict[str, Any]:
    """Functional collectives inside torch.compile(backend="neuron"): one graph, same numbers as eager."""
    import torch.distributed._functional_collectives as funcol
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.neuron.reset_dynamo_metrics()

    def step(x: torch.Tensor) -> torch.Tensor:
        total = funcol.all_reduce(x * 2, "sum", dist.group.WORLD)
        return funcol.all_gather_tensor(total.sin(), 0, dist.group.WORLD)

    x = torch.arange(4.0, device=_device()) + rank
    out = torch.compile(step, backend="neuron", fullgraph=True)(x)
    total = sum((torch.arange(4.0) + r) * 2 for r in range(world))
    return {"diff": _diff(out, total.sin().repeat(world)), "graphs": len(torch.neuron.get_dynamo_metrics()),
            "device": str(out.device)}


def _offset(state: torch.Tensor) -> int:
    """The offset of a 16-byte (seed, offset) generator state."""
    return int(state[8:].view(torch.int64).item())


def random_init() -> dict[str, Any]:
    """FSDP2 parameters made on the meta device and initialised on the cores, as TorchTitan does: DTensor random
    ops go through PyTorch's RNG tracker, which moves the device generator's Philox offset. S's random ops are CPU
    fallbacks drawing from the host generator (tests/device/test_rng_state.py xfail), and the tracker's fork_rng
    restores the host generator after each op: every local shard holds the host's draws from the same state.
    Then one step with a gradient divide factor, which
    FSDP2 reduce-scatters with ReduceOp.PREMUL_SUM, against the CPU."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("neuron", (world,))
    with torch.device("meta"):
        model = _MLP()
    fully_shard(model, mesh=mesh)
    model.to_empty(device=_device())
    torch.manual_seed(0)  # seeds the host and every core
    before, host = torch.neuron.get_rng_state(), torch.get_rng_state()
    for param in model.parameters():
        nn.init.normal_(param, std=0.1)
    after, host_restored = torch.neuron.get_rng_state(), torch.equal(torch.get_rng_state(), host)
    expected = []  # the tracker's fork_rng restores the host generator after each op: each draw starts from `host`
    for param in model.parameters():
        torch.set_rng_state(host)
        expected.append(torch.empty(param.to_local().shape).normal_(std=0.1))
    init_diff = max(_diff(p.to_local(), e) for p, e in zip(model.parameters(), expected))
    reference = _MLP()
    reference.load_state_dict({name: _full(value).cpu() for name, value in model.state_dict().items()})
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(1))
    factor = 2.0 * world  # not the world size, so FSDP2 uses PREMUL_SUM(1 / factor) rather than AVG
    model.set_gradient_divide_factor(factor)
    model(_local_slice(x, rank, world).to(_device())).pow(2).mean().backward()
    reference(x).pow(2).mean().backward()
    grad_diff = max(_diff(_full(p.grad), r.grad * world / factor)
                    for p, r in zip(model.parameters(), reference.parameters()))
    return {"state_bytes": before.numel(), "offset_before": _offset(before), "offset_after": _offset(after),
            "host_restored": host_restored,
            "full_numels": [p.numel() for p in model.parameters()], "init_diff": init_diff, "grad_diff": grad_diff}


def premul_sum() -> dict[str, Any]:
    """ReduceOp.PREMUL_SUM: all_reduce and reduce_scatter multiply the inputs, then sum (S utils.py:63-89);
    reduce, which S hands the op unchanged, says so."""
    rank, world = dist.get_rank(), dist.get_world_size()
    device = _device()
    total = torch.full((2,), float(rank + 1), device=device)
    dist.all_reduce(total, op=dist._make_nccl_premul_sum(0.5))
    sent = torch.arange(2.0 * world, device=device) + rank
    scattered = torch.empty(2, device=device)
    dist.reduce_scatter_tensor(scattered, sent, op=dist._make_nccl_premul_sum(0.25))
    try:
        dist.reduce(torch.ones(2, device=device), dst=0, op=dist._make_nccl_premul_sum(0.5))
        reduce_error = ""
    except NotImplementedError as exc:
        reduce_error = str(exc)
    expected_scatter = 0.25 * sum(torch.arange(2.0 * world) + r for r in range(world)).chunk(world)[rank]
    return {"all_reduce": total.cpu().tolist(), "expected_all_reduce": [0.5 * world * (world + 1) / 2] * 2,
            "scatter_diff": _diff(scattered, expected_scatter), "input_unchanged": _diff(sent.cpu() - rank,
                                                                                      torch.arange(2.0 * world)),
            "reduce_error": reduce_error}


def flex() -> dict[str, Any]:
    """FlexAttention (causal mask, relative bias, GQA) under torch.compile(backend="neuron") on this rank's half
    of the batch, forward and backward, against SDPA with the same bias on the CPU. FlexAttention's own device
    check is lifted for `neuron` tensors, as S's GPT-OSS example does (examples/torch_compile/models/gpt_oss/
    attention.py:17-26): a client-side change, not the device's."""
    import torch.nn.attention.flex_attention as flex_module
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    rank, world = dist.get_rank(), dist.get_world_size()
    original = flex_module._validate_device
    flex_module._validate_device = lambda q, k, v: None if q.device.type == "neuron" else original(q, k, v)
    generator = torch.Generator().manual_seed(3)
    batch, length = 2 * world, 16
    cpu = [torch.randn(batch, heads, length, 8, generator=generator).requires_grad_() for heads in (4, 2, 2)]
    i, j = torch.arange(length)[:, None], torch.arange(length)[None, :]
    bias = torch.where(i >= j, 0.1 * (i - j), float("-inf"))
    expected = nn.functional.scaled_dot_product_attention(*cpu, attn_mask=bias, enable_gqa=True)
    expected.pow(2).sum().backward()
    mine = [_local_slice(t.detach(), rank, world).to(_device()).requires_grad_() for t in cpu]

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any) -> torch.Tensor:
        return flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + 0.1 * (qi - ki), block_mask=mask,
                              enable_gqa=True)

    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, 1, 1, length, length, device=str(_device()))
    out = torch.compile(attend, backend="neuron", fullgraph=True)(*mine, mask)
    out.pow(2).sum().backward()
    return {"output_diff": _diff(out, _local_slice(expected, rank, world)),
            "grad_diff": max(_diff(m.grad, _local_slice(t.grad, rank, world)) for m, t in zip(mine, cpu)),
            "device": str(out.device)}


SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {
    "ddp": ddp, "fsdp1": fsdp1, "fsdp2": fsdp2, "tp": tensor_parallel, "sp": sequence_parallel, "fsdp2_tp": fsdp2_tp,
    "pp": pipeline, "dtensor": dtensor_ops, "dcp": checkpoint, "collectives": collectives,
    "all_to_all": all_to_all, "compile": compiled, "random_init": random_init, "premul_sum": premul_sum,
    "flex": flex,
}


def main(argv: list[str] | None = None) -> None:
    """Run the named scenarios on this rank and write its results."""
    global MODEL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default=MODEL, help="a causal LM for ddp/fsdp2/tp (default: %(default)s)")
    parser.add_argument("scenarios", nargs="+", choices=sorted(SCENARIOS))
    args = parser.parse_args(argv)
    MODEL = args.model
    os.environ["NEURONKIT_SCENARIO_OUT"] = str(args.out)
    dist.init_process_group()
    from neuronkit.device.simulator.registration import installed
    results: dict[str, Any] = {"rank": dist.get_rank(), "world_size": dist.get_world_size(),
                               "local_rank": int(os.environ.get("LOCAL_RANK", "0")), "device": str(_device()),
                               "visible_cores": os.environ.get("NEURON_RT_VISIBLE_CORES", ""),
                               "simulated": installed(),
                               "backend": dist.get_backend_config(), "scenarios": {}}
    for name in args.scenarios:
        results["scenarios"][name] = SCENARIOS[name]()
        dist.barrier()
    (args.out / f"rank{dist.get_rank()}.json").write_text(json.dumps(results, indent=1))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
