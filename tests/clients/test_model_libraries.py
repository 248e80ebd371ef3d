"""Libraries that build and train models of their own, as released, on the simulated device with parity against
the CPU: sentence-transformers (encode, one training step), litgpt (training steps and KV-cached generation) and
torchao's int8 quantization (eager and compiled). Tiny models built here or bundled; nothing from a hub. Each
library is imported by its test (xdist workers collect every module)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from neuronkit.resources import data_dir

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _sentence_encoder(device: str | None):
    """A sentence-transformers model over the bundled tiny BERT: its token embeddings, mean-pooled."""
    from sentence_transformers import SentenceTransformer, models

    torch.manual_seed(0)
    words = models.Transformer(str(data_dir() / "models" / "tiny-bert"), max_seq_length=32)
    return SentenceTransformer(modules=[words, models.Pooling(words.get_word_embedding_dimension(), "mean")],
                               device=device)


def test_sentence_transformers_encodes_and_trains_on_neuron_like_the_cpu(tmp_path):
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments, losses

    sentences = ["a cat sits on the mat", "tensors live on the cores", "ops fall back to the host"]
    on_cpu = _sentence_encoder("cpu").encode(sentences, convert_to_tensor=True)
    encoder = _sentence_encoder(None)
    assert str(encoder.device) == "neuron:0"  # sentence-transformers 6 picks torch.neuron itself
    on_core = encoder.encode(sentences, convert_to_tensor=True)
    assert on_core.device.type == "neuron" and (on_core.cpu() - on_cpu).abs().max() < 1e-5

    pairs = Dataset.from_dict({"anchor": ["a cat sits", "tensors on cores", "a dog runs", "ops fall back"],
                               "positive": ["a cat is sitting", "cores hold tensors", "a dog is running",
                                            "ops run on the host"]})
    runs = {}
    for use_cpu in (True, False):
        model = _sentence_encoder("cpu" if use_cpu else None)
        args = SentenceTransformerTrainingArguments(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4,
                                                    learning_rate=1e-3, seed=0, use_cpu=use_cpu, report_to=[],
                                                    save_strategy="no", logging_steps=1, disable_tqdm=True)
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=pairs,
                                             loss=losses.MultipleNegativesRankingLoss(model))
        trainer.train()
        runs[str(args.device)] = ([entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
                                  torch.cat([p.detach().cpu().flatten() for p in model.parameters()]))
    assert set(runs) == {"cpu", "neuron:0"}
    assert runs["neuron:0"][0] == pytest.approx(runs["cpu"][0], abs=1e-5)
    assert (runs["neuron:0"][1] - runs["cpu"][1]).abs().max() < 1e-5


def test_litgpt_trains_and_generates_on_neuron_like_the_cpu():
    from litgpt import GPT, Config
    from litgpt.generate.base import generate

    config = Config(block_size=32, vocab_size=128, padded_vocab_size=128, n_layer=2, n_head=4, n_embd=32,
                    n_query_groups=2, rotary_percentage=1.0, parallel_residual=False, bias=False,
                    norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP", intermediate_size=64)
    tokens = torch.randint(128, (2, 16), generator=torch.Generator().manual_seed(0))
    runs = {}
    for device in ("cpu", "neuron"):
        torch.manual_seed(0)
        model = GPT(config).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        batch, losses = tokens.to(device), []
        for _ in range(2):
            logits = model(batch[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 128), batch[:, 1:].reshape(-1))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        model.eval()
        model.set_kv_cache(batch_size=1, device=torch.device(device))
        with torch.no_grad():
            generated = generate(model, batch[0, :6], max_returned_tokens=12, temperature=0.0)
        runs[device] = (losses, generated.cpu().tolist())
    assert runs["neuron"][0] == pytest.approx(runs["cpu"][0], abs=1e-5) and runs["neuron"][1] == runs["cpu"][1]
    assert runs["cpu"][0][1] < runs["cpu"][0][0]


# torchao lies apart from the venv's packages (`make setup`: pip install --target .venv/torchao): installed there,
# transformers (>= 0.15) and peft would import it in every process, and torchtitan 0.3.0 fails on its import.
TORCHAO = Path(sys.prefix) / "torchao"


@pytest.mark.subprocess
@pytest.mark.skipif(not (TORCHAO / "torchao").is_dir(), reason=f"torchao is not installed apart in {TORCHAO} "
                    "(make setup installs it there: pip install --no-deps --target)")
def test_torchao_int8_runs_on_neuron_like_the_cpu_eager_and_compiled(forked_python):
    """int8 weight-only and dynamic-activation quantization (torchao's quantize_), in a process that finds
    torchao on its PYTHONPATH, as a team's environment with torchao installed would."""
    proc = forked_python("""
        import copy, json, torch, torchao, torchao.quantization as quantization

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32))
        inputs = torch.randn(4, 64, generator=torch.Generator().manual_seed(1))
        unquantized = model(inputs)
        found = {}
        for scheme in ("Int8WeightOnlyConfig", "Int8DynamicActivationInt8WeightConfig"):
            outputs = {}
            for device in ("cpu", "neuron"):
                quantized = copy.deepcopy(model).to(device)
                quantization.quantize_(quantized, getattr(quantization, scheme)())
                assert quantized[0].weight.device.type == device and type(quantized[0].weight) is not torch.nn.Parameter
                with torch.no_grad():
                    outputs[device] = quantized(inputs.to(device)).cpu()
            with torch.no_grad():
                compiled = torch.compile(quantized, backend="neuron", dynamic=False)(inputs.to("neuron")).cpu()
            found[scheme] = {"device": torch.equal(outputs["neuron"], outputs["cpu"]),
                             "compiled": torch.equal(compiled, outputs["neuron"]),
                             "int8_error": (outputs["cpu"] - unquantized).abs().max().item()}
        print(json.dumps({"version": torchao.__version__, "found": found,
                          "graphs": len(torch.neuron.get_dynamo_metrics())}))
    """, env={"PYTHONPATH": str(TORCHAO)})
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for scheme, found in result["found"].items():
        assert found["device"] and found["compiled"], (scheme, found)
        assert 0 < found["int8_error"] < 0.05, (scheme, found)  # int8: close to float32, not equal
    assert result["graphs"] >= 2, result
