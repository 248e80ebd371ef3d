"""Client-side changes TorchTitan 0.3.0 (as released) needs on the `neuron` device: what the seed's
`torchtitan-neuron` fork carries. Each one says why and what removes it. They change the client, never the
simulated device: `apply()` is called by `python -m neuronkit.titan.train` before torchtitan is imported.
"""

from __future__ import annotations

import contextlib

import torch


def _init_weights_from_the_host_generator() -> None:
    """Why: the device's random ops are CPU fallbacks that draw from the host generator (S
    tests/device/test_rng_state.py:85-104, xfail), and DTensor's RNG tracker wraps every random op of a sharded
    parameter in `fork_rng`, which restores the host generator afterwards: every op draws the same numbers, so
    torch 2.13's `trunc_normal_` rejection loop (torch/nn/init.py) redraws the same out-of-range values forever.
    Here parameter init runs with the tracker's region off, so each op draws on from the host generator (ranks
    seeded alike get the same local shards). The client finding `torch.distributed/random_init`
    (neuronkit/data/client_paths.toml). Removed when the device has native random ops (S's xfail passes);
    torchtitan's seed checkpoint does not avoid it (the trainer initialises on the cores before loading)."""
    from torch.distributed.tensor import DTensor, _random
    from torchtitan.protocols.model import BaseModel

    original = BaseModel.init_weights

    def init_weights(self, **kwargs) -> None:
        sharded = [p for p in self.parameters() if isinstance(p, DTensor)]
        if sharded and _random._rng_tracker is None:  # made now (DTensor makes it at the first random op)
            _random._rng_tracker = _random.OffsetBasedRNGTracker(sharded[0].device_mesh)
        tracker = _random._rng_tracker
        with contextlib.nullcontext() if tracker is None else _tracker_off(tracker):
            original(self, **kwargs)

    BaseModel.init_weights = init_weights


@contextlib.contextmanager
def _tracker_off(tracker):
    enabled = tracker.distribute_region_enabled
    tracker.distribute_region_enabled = False
    try:
        yield
    finally:
        tracker.distribute_region_enabled = enabled


def _compile_with_the_neuron_backend() -> None:
    """Why: torchtitan compiles `create_block_mask` and `flex_attention` when its modules are imported
    (torchtitan/models/common/attention.py: `torch.compile(...)` with no backend, so inductor, which has no
    `neuron` code generator), whether or not `--compile.enable` is given. The default backend must be `neuron`
    before that import. The seed's fork passes `backend="neuron"` there; removed when torchtitan takes the
    backend of `--compile.backend` for these compiles too."""
    torch.compiler.set_default_backend("neuron")


def _flex_attention_accepts_the_device() -> None:
    """Why: PyTorch's FlexAttention refuses tensors of devices it does not know, `neuron` included
    (torch/nn/attention/flex_attention.py `_validate_device`), in eager and under compile; the real backend
    lowers the op (S neuron_dynamo_backend/fx/passes/flex_attention_legalization.py) and its GPT-OSS example
    lifts the check the same way (S examples/torch_compile/models/gpt_oss/attention.py:17-26). Removed when
    PyTorch's check admits out-of-tree devices."""
    import torch.nn.attention.flex_attention as flex

    original = flex._validate_device

    def validate_device(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        if query.device.type != "neuron":
            original(query, key, value)

    flex._validate_device = validate_device


def _rope_in_cos_sin() -> None:
    """Why: Llama 3's RoPE keeps its table as complex numbers (`torch.polar`) and gathers and multiplies them
    (torchtitan/models/common/rope.py `ComplexRoPE`); the device computes no complex dtype (S keeps complex
    tensors for storage only), so the first step fails in `aten::gather`. Here the same rotation uses the
    table's real and imaginary parts (cos, sin) on the same adjacent pairs, so the numbers and a checkpoint's
    layout are unchanged. torchtitan's own `CosSinRoPE` is no drop-in: it pairs halves and refuses Llama's
    frequency scaling. The seed's fork carries a cos/sin RoPE; removed when upstream does."""
    from torchtitan.models.common.rope import ComplexRoPE, CosSinRoPE

    complex_table = ComplexRoPE._precompute_cache

    def precompute_cache(self) -> torch.Tensor:
        target = torch.empty(0).device  # the device `_init_self_buffers` builds the table on
        with torch.device("cpu"):
            table = complex_table(self)  # (positions, head_dim / 2) complex64
        return torch.cat([table.real, table.imag], dim=-1).to(target)  # (positions, head_dim): cos | sin

    def apply_rotary_emb(query: torch.Tensor, key: torch.Tensor, rope_cache: torch.Tensor):
        cos, sin = rope_cache.chunk(2, dim=-1)

        def rotate(x: torch.Tensor) -> torch.Tensor:
            pairs = x.float().unflatten(-1, (-1, 2))  # adjacent (real, imaginary) pairs, as view_as_complex
            real, imag = pairs[..., 0], pairs[..., 1]
            return torch.stack([real * cos - imag * sin, real * sin + imag * cos], dim=-1).flatten(-2).type_as(x)

        return rotate(query), rotate(key)

    ComplexRoPE._precompute_cache = precompute_cache
    ComplexRoPE._reshape_cache = CosSinRoPE._reshape_cache  # the table is head_dim wide, as CosSinRoPE's
    ComplexRoPE.apply_rotary_emb = staticmethod(apply_rotary_emb)


def _set_timeout_of_torch_2_13() -> None:
    """Why: after its first step torchtitan shortens every process group's timeout with
    `torch.distributed.set_timeout` (torchtitan/distributed/utils.py `set_pg_timeouts`), which torch 2.13 does
    not have; it has the private `distributed_c10d._set_pg_timeout`, which sets the Gloo and NCCL backends'
    timeouts and leaves other backends' (the `neuron` process group's) as they are. Removed with a torch that
    has `set_timeout` (the torch torchtitan 0.3.0 is tested with) or a torchtitan that checks for it."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    if not hasattr(dist, "set_timeout"):
        dist.set_timeout = distributed_c10d._set_pg_timeout


def _flex_attention_compiles_with_the_neuron_backend() -> None:
    """Why: with `--compile.enable`, torchtitan refuses FlexAttention under any backend but inductor and
    aot_eager, because only inductor has a FlexAttention lowering in PyTorch
    (torchtitan/distributed/compile.py `_maybe_regional_inductor_backend`). The `neuron` backend has its own:
    it legalizes the higher-order op into ATen ops (S neuron_dynamo_backend/fx/passes/
    flex_attention_legalization.py:33-50), so the backend is passed through unchanged. Removed when torchtitan
    lets a backend that lowers FlexAttention itself through."""
    from torchtitan.distributed import compile as titan_compile

    original = titan_compile._maybe_regional_inductor_backend

    def maybe_regional_inductor_backend(model: torch.nn.Module, backend):
        return backend if backend == "neuron" else original(model, backend)

    titan_compile._maybe_regional_inductor_backend = maybe_regional_inductor_backend


def apply() -> None:
    """Apply every shim, once per process, before torchtitan is imported."""
    _compile_with_the_neuron_backend()
    _flex_attention_accepts_the_device()
    _init_weights_from_the_host_generator()
    _rope_in_cos_sin()
    _set_timeout_of_torch_2_13()
    _flex_attention_compiles_with_the_neuron_backend()
