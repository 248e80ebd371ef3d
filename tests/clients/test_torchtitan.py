"""The TorchTitan recipe (issue 24): torchtitan 0.3.0 as released, through torchrun on 2 simulated cores with
FSDP2 and `--compile.enable --compile.backend neuron`, the llama3 debug model, offline assets, and the
client-side shims of `neuronkit.titan.shims`. Installed by `make setup` (pyproject's `titan` group)."""

from __future__ import annotations

import pytest
import torch

from neuronkit.titan import recipe, shims


@pytest.mark.subprocess
def test_torchtitan_recipe_trains_on_two_cores_with_compile_and_the_ranks_agree(tmp_path):
    run = recipe.run(nproc=2, steps=3, out=tmp_path)
    assert "--compile.enable" in run.command and run.command[run.command.index("--compile.backend") + 1] == "neuron"
    assert sorted(run.losses) == [0, 1] and len(run.losses[0]) == 3
    assert run.losses[0] == run.losses[1]  # the global loss every rank logs after its all-reduce
    assert run.losses[0][-1] < run.losses[0][0]
    assert "Applied FSDP to the model" in run.log and "Compiling each TransformerBlock" in run.log


def test_torchtitan_rope_shim_rotates_as_the_complex_table(monkeypatch):
    """The cos/sin RoPE of the shims gives Llama 3's complex RoPE's numbers (with Llama frequency scaling)."""
    from torchtitan.models.common.rope import ComplexRoPE
    config = ComplexRoPE.Config(dim=16, max_seq_len=32, theta=500000, scaling="llama")
    generator = torch.Generator().manual_seed(0)
    query, key = torch.randn(1, 8, 4, 16, generator=generator), torch.randn(1, 8, 2, 16, generator=generator)
    expected = ComplexRoPE(config)(query, key)
    for name in ("_precompute_cache", "_reshape_cache", "apply_rotary_emb"):
        monkeypatch.setattr(ComplexRoPE, name, ComplexRoPE.__dict__[name])  # restored after the test
    shims._rope_in_cos_sin()
    rope = ComplexRoPE(config)
    assert not rope.cache.is_complex()
    for mine, theirs in zip(rope(query, key), expected):
        assert (mine - theirs).abs().max() < 1e-5


def test_torchtitan_recipe_refuses_no_cores_in_one_line(tmp_path):
    from neuronkit.errors import NeuronkitInputError
    with pytest.raises(NeuronkitInputError, match="at least one core and one step"):
        recipe.run(nproc=0, out=tmp_path)
