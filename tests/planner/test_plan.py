"""`neuronkit plan`: per-rank memory and step collectives of a parallel layout, on PyTorch's fake group."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import neuronkit
from neuronkit import NeuronkitInputError
from neuronkit.cli import main
from neuronkit.planner.instances import instance

LAYERS = 4
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> str:
    """A small untied Llama config (weights are never needed: the planner reads shapes only)."""
    path = tmp_path_factory.mktemp("llama") / "config.json"
    path.write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 160, "num_hidden_layers": LAYERS, "num_attention_heads": 16,
        "num_key_value_heads": 8, "vocab_size": 512, "max_position_embeddings": 4096,
        "tie_word_embeddings": False}))
    return str(path)


def _param_bytes(spec: str, dtype: torch.dtype) -> int:
    from neuronkit import models
    return models.num_parameters(models.load_config(spec)) * dtype.itemsize


def test_fsdp_shards_every_parameter_across_the_instance(llama):
    trn2 = instance("trn2.48xlarge")
    plan = neuronkit.plan(llama, tp=1, fsdp=64)
    total = _param_bytes(llama, torch.bfloat16)
    # FSDP2 splits each parameter's first dimension in 64, rounding up (a 64-wide norm puts one row on each
    # rank): a tiny model pays a few per cent of padding. AdamW keeps two states per parameter.
    assert total / 64 <= plan.memory.parameters <= total / 64 * 1.2
    assert plan.memory.gradients == plan.memory.parameters
    assert plan.memory.optimizer == 2 * plan.memory.parameters
    assert plan.hbm_per_core == trn2.hbm_bytes_per_core == 24 * 2**30
    assert plan.fits and plan.headroom == plan.hbm_per_core - plan.memory.total
    gathered = {c.carries: c for c in plan.collectives if c.group == "fsdp"}
    # one reduce-scatter of every gradient per step: the whole model's bytes
    assert gathered["gradients"].kind == "reduce_scatter"
    assert gathered["gradients"].nbytes == pytest.approx(total, rel=0.01)
    assert gathered["parameters (forward)"].calls == LAYERS + 1


def test_tensor_parallel_issues_the_megatron_all_reduces(llama):
    plan = neuronkit.plan(llama, tp=4, fsdp=16)
    by = {(c.kind, c.carries): c for c in plan.collectives if c.group == "tp"}
    # measured from PyTorch: per layer one all-reduce after attention and one after the MLP in forward,
    # five in backward (q, k, v, gate, up inputs); plus the embedding's and the LM head's
    assert by["all_reduce", "activations (forward)"].calls == 2 * LAYERS + 1
    assert by["all_reduce", "activations (backward)"].calls == 5 * LAYERS + 1
    hidden_bytes = 1 * 2048 * 64 * 2
    assert by["all_reduce", "activations (forward)"].nbytes == (2 * LAYERS + 1) * hidden_bytes
    assert by["all_gather", "activations (forward)"].nbytes == 2048 * 512 * 2  # logits gathered for the loss
    assert {c.link for c in plan.collectives if c.group == "tp"} == {"same chip"}  # 4 logical cores per chip


def test_tensor_parallel_halves_layer_memory(llama):
    one = neuronkit.plan(llama, tp=1, fsdp=64, seq_len=512)
    two = neuronkit.plan(llama, tp=2, fsdp=32, seq_len=512)
    assert two.memory.activations < one.memory.activations
    longer = neuronkit.plan(llama, tp=1, fsdp=64, seq_len=1024)
    assert 1.8 < longer.memory.activations / one.memory.activations < 2.2


def test_groups_that_span_instances_use_efa(llama):
    plan = neuronkit.plan(llama, tp=8, fsdp=8, dp=2, nodes=2)
    links = {c.group: c.link for c in plan.collectives}
    assert links == {"tp": "NeuronLink", "fsdp": "NeuronLink", "dp": "EFA"}
    dp = next(c for c in plan.collectives if c.group == "dp")
    trn2 = instance("trn2.48xlarge")
    assert dp.est_seconds == pytest.approx(2 * (2 - 1) / 2 * dp.nbytes / trn2.efa_bytes_per_s_per_core)


def test_pipeline_stages_hold_their_layers_and_in_flight_micro_batches(llama):
    flat = neuronkit.plan(llama, tp=1, fsdp=64, seq_len=256)
    staged = neuronkit.plan(llama, tp=1, fsdp=16, pp=4, seq_len=256)
    assert staged.microbatches == 4
    assert staged.memory.stage in (0, 3)
    send = next(c for c in staged.collectives if c.group == "pp")
    assert send.kind == "send_recv" and send.nbytes == 2 * 4 * 256 * 64 * 2
    assert any("1F1B" in note for note in staged.notes)
    assert flat.layout.pp == 1 and not any(c.group == "pp" for c in flat.collectives)


def test_a_layout_that_does_not_fit_says_by_how_much(llama, capsys):
    plan = neuronkit.plan(llama, tp=1, fsdp=1, dp=64, micro_batch=2048, seq_len=1024)
    assert not plan.fits and plan.headroom < 0
    assert "does NOT fit" in plan.verdict() and "short by" in plan.verdict()
    assert main(["plan", llama, "--dp", "64", "--fsdp", "1", "--batch", "2048", "--seq-len", "1024"]) == 1
    assert main(["plan", llama, "--tp", "2"]) == 0
    assert "fits" in capsys.readouterr().out


def test_sweep_proposes_the_fewest_instances_fastest_first(llama):
    plans = neuronkit.planner.plan.sweep(llama, seq_len=512, top=3)
    assert plans and all(p.fits and p.nodes == 1 for p in plans)
    times = [p.comm_seconds for p in plans]
    assert times == sorted(times)


def test_json_document(llama, tmp_path):
    out = tmp_path / "plan.json"
    assert main(["plan", llama, "--tp", "2", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["layout"] == {"tp": 2, "fsdp": 32, "dp": 1, "pp": 1, "world": 64}
    assert data["fits"] is True and data["memory"]["total"] > 0
    assert math.isclose(data["comm_seconds_estimate"], sum(c["est_seconds"] for c in data["collectives"]))
    assert data["source"].startswith("https://")


@pytest.mark.parametrize("kwargs, message", [
    ({"tp": 3}, "does not divide the 64 cores"),
    ({"tp": 32}, "does not divide the model's num_attention_heads"),
    ({"tp": 2, "fsdp": 2}, "uses 4 ranks"),
    ({"instance": "p5.48xlarge"}, "unknown instance"),
    ({"dtype": "int8"}, "not one the neuron device computes in"),
    ({"pp": 8, "fsdp": 8}, "exceeds the model's 4 layers"),
    ({"micro_batch": 0}, "micro_batch must be a positive integer"),
])
def test_bad_input_is_one_line(llama, kwargs, message):
    with pytest.raises(NeuronkitInputError, match=message):
        neuronkit.plan(llama, **kwargs)


def test_cli_bad_input_exits_2(llama, capsys):
    assert main(["plan", llama, "--tp", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("neuronkit plan: error:") and "\n" not in err
    assert main(["plan", "no-such-model"]) == 2


def test_models_without_a_tensor_parallel_plan_are_refused_for_tp(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["BertForMaskedLM"], "model_type": "bert", "hidden_size": 64,
                                  "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                                  "vocab_size": 512}))
    with pytest.raises(NeuronkitInputError, match="no tensor-parallel plan for BertLayer"):
        neuronkit.plan(str(config), tp=2, seq_len=256)
    with pytest.raises(NeuronkitInputError, match="seq_len 2048 exceeds the model's max_position_embeddings 512"):
        neuronkit.plan(str(config))
    assert neuronkit.plan(str(config), tp=1, seq_len=256).fits


@pytest.mark.notebooks
def test_scale_out_notebook_plans_the_model_and_an_8b_config(tmp_path, forked_kernels):
    import nbformat
    import papermill

    from neuronkit.kernels.starter import KERNEL_NAME, shutdown

    notebook = ROOT / "notebooks" / "07_scale_out.ipynb"
    out = tmp_path / "07.ipynb"
    km = forked_kernels.km(notebook.parent)
    try:
        papermill.execute_notebook(str(notebook), str(out), kernel_name=KERNEL_NAME, cwd=str(notebook.parent),
                                   parameters={"model": "tiny-qwen3", "seq_len": 128, "run_dir": str(tmp_path / "run")},
                                   progress_bar=False, km=km)
    finally:
        shutdown(km)
    text = "\n".join(o.get("text", "") for c in nbformat.read(out, as_version=4).cells
                     for o in c.get("outputs", []))
    assert "DDP ×64: dp=64 on 1 × trn2.48xlarge (64 ranks): does NOT fit" in text
    assert "TP 4 × FSDP2 16: tp=4 × fsdp=16 on 1 × trn2.48xlarge (64 ranks): fits" in text
    # a 0.5 MB model gets the smallest instance, not 64 cores; its layout measured there; what it will cost
    assert "1. 1 × trn1.2xlarge, dp=2:" in text and "dp=2 on 1 × trn1.2xlarge (2 ranks): fits" in text
    assert "tp=32 × dp=32 on 32 × trn1.32xlarge: 48 sequences/s" in text  # AWS published 47.95
    assert "no on-demand price published for trn2.48xlarge" in text and "output tokens/s" in text
    costs = json.loads((tmp_path / "run" / "cost.json").read_text())
    assert costs["training"][0]["instance"] == "trn1.2xlarge" and costs["serving"][0]["usd_per_million_tokens"] > 0
    images = [o for c in nbformat.read(out, as_version=4).cells for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) == 1
    # a layout that does not divide the cores, refused in one line
    assert "NeuronkitInputError: tp×pp×dp = 3 does not divide the 64 cores of 1 × trn2.48xlarge" in text
    # the learner's own FSDP2 script, copied into the run directory and launched with torchrun on two cores
    script = (tmp_path / "run" / "train_fsdp2.py").read_text()
    assert "import neuronkit" not in script and "from neuronkit" not in script
    assert "fully_shard(" in script and 'init_device_mesh("neuron"' in script
    assert "$ torchrun --standalone --nproc-per-node 2 train_fsdp2.py --model" in text and "exit status 0" in text
    assert "rank 0 on neuron:0: 279,296 of 558,592 parameter bytes" in text
    assert "rank 1 on neuron:1: 279,296 of 558,592 parameter bytes" in text
    assert "step 2: loss" in text
    # then DDP and FSDP2 on two simulated cores, with parity against one CPU process, recorded for the report
    assert "ranks on neuron:0, neuron:1 through the neuron:neuron process group" in text
    assert text.count(": parity") == 2 and "NO PARITY" not in text
    record = json.loads((tmp_path / "run" / "distributed.json").read_text())
    assert record["scenarios"]["fsdp2"]["param_bytes_per_rank"] == [279296, 279296]
    # then a Lightning script, unchanged, on the same cores: Lightning's DDP with bf16 autocast on neuron
    for rank in (0, 1):
        assert f"rank {rank} on neuron:{rank}: DDPStrategy, bf16-mixed (logits in torch.bfloat16)" in text
    assert "train_lightning.py --model" in text and text.count("exit status 0") == 2
    assert "import neuronkit" not in (tmp_path / "run" / "train_lightning.py").read_text()
    # then the TorchTitan recipe's command, not run (tests/clients/test_torchtitan.py runs it)
    assert "NEURON_RT_NUM_CORES=2 torchrun --nproc-per-node=2" in text and "--compile.backend neuron" in text
    assert "Applied FSDP to the model" not in text


@pytest.mark.parametrize("name", ["vit", "t5", "whisper", "bert_classifier"])
def test_a_model_the_planner_cannot_probe_is_named_in_one_line(zoo, name, capsys):
    """The planner trains a token model on token ids; images, encoder-decoders and classifiers are refused
    as bad input before any probe, not crashed on."""
    assert main(["plan", str(zoo[name]), "--seq-len", "32"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "plans causal and masked language models and their base stacks" in err, err


def test_a_model_that_reads_values_while_built_is_not_measured_but_named(tmp_path, capsys):
    """ModernBERT's constructor reads a tensor's value, which fake tensors cannot give: the measured plan is
    refused in one line pointing at the cost model's estimate, which does not need it."""
    from transformers import ModernBertConfig

    ModernBertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128, pad_token_id=0, eos_token_id=1,
                     bos_token_id=2, cls_token_id=2, sep_token_id=1,
                     architectures=["ModernBertForMaskedLM"]).save_pretrained(tmp_path / "modernbert")
    assert main(["plan", str(tmp_path / "modernbert"), "--seq-len", "16"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "cannot measure ModernBertForMaskedLM with fake tensors" in err
    assert main(["plan", str(tmp_path / "modernbert"), "--seq-len", "16", "--global-batch", "8"]) == 0


HYBRIDS = {
    # Qwen3-Next: its first block is linear attention, so the probe's one-block model has no attention layer
    # and a KV cache transformers cannot make a causal mask from (a training step reads no cache)
    "qwen3_next": {"architectures": ["Qwen3NextForCausalLM"], "head_dim": 8, "num_experts": 4,
                   "num_experts_per_tok": 2, "moe_intermediate_size": 16, "shared_expert_intermediate_size": 16,
                   "linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 8,
                   "linear_value_head_dim": 8, "layer_types": ["linear_attention", "full_attention"]},
    # Bamba: `layer_types` is a property derived from the block count (no setter), not a config.json key
    "bamba": {"architectures": ["BambaForCausalLM"], "mamba_n_heads": 4, "mamba_d_head": 16, "mamba_d_state": 8,
              "mamba_n_groups": 1, "mamba_chunk_size": 16, "attn_layer_indices": [1]},
}


@pytest.mark.parametrize("name", HYBRIDS)
def test_hybrid_attention_families_are_planned_and_estimated(name, tmp_path, capsys):
    """Hybrid linear-attention / state-space decoders: the measured plan and the serving estimate both give
    their figures (the one-block probe and the cost model's one-block count cut these configs too)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": name, "hidden_size": 32, "intermediate_size": 64,
                                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                "vocab_size": 128, "max_position_embeddings": 128, **HYBRIDS[name]}))
    assert main(["plan", str(path), "--seq-len", "32"]) == 0, capsys.readouterr().err
    assert main(["plan", str(path), "--serve"]) == 0, capsys.readouterr().err
