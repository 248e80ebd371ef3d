"""The shapes a checkpoint arrives in besides `save_pretrained`'s own: a config saved without `architectures`,
no tokenizer, `.bin` weights only, safetensors shards with their index, no weights. Each loads as what it is,
and the run's records name what neuronkit had to choose (the class, where the inputs come from)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import transformers
from transformers import BertConfig, BertForSequenceClassification, BertModel, LlamaConfig

import neuronkit
from neuronkit import inputs, models
from neuronkit.cli import main
from neuronkit.resources import data_dir

TINY_BERT = data_dir() / "models" / "tiny-bert"


def _saved(model: torch.nn.Module, folder: Path, *, architectures: bool = True, tokenizer: bool = True,
           **save: object) -> Path:
    """`model` saved into `folder` (with tiny-bert's tokenizer unless not `tokenizer`), its config.json without
    `architectures` unless `architectures`."""
    model.save_pretrained(folder, **save)
    if tokenizer:
        for file in TINY_BERT.iterdir():
            if file.name.startswith(("tokenizer", "vocab", "special_tokens")):
                shutil.copy(file, folder / file.name)
    if not architectures:
        config = json.loads((folder / "config.json").read_text())
        config.pop("architectures", None)
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def _tiny(cls: type, **extra: object) -> torch.nn.Module:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=1000, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                        max_position_embeddings=64, **extra)
    return cls(config).eval()


@pytest.mark.parametrize("cls", [BertModel, BertForSequenceClassification])
def test_a_config_without_architectures_runs_as_the_class_its_weights_match(cls, tmp_path):
    folder = _saved(_tiny(cls, num_labels=3), tmp_path / "ckpt", architectures=False)
    config = models.load_config(folder)
    name, source = models.architecture_of(folder)
    assert config.architectures == [cls.__name__] and name == cls.__name__
    assert source.startswith("config.json names no architecture: the bert class whose weights match"), source
    model, weights = models.load_checkpoint(folder)
    assert type(model) is cls and weights.missing == () and weights.unexpected == ()


@pytest.mark.parametrize("cls, named", [("LlamaForCausalLM", "named under 'model.'"),
                                        ("LlamaModel", "named without 'model.'")])
def test_tied_embeddings_without_architectures_run_as_the_class_the_weight_names_say(cls, named, tmp_path, capsys):
    """A Llama with tied embeddings saved from LlamaForCausalLM stores no lm_head.weight (it is the input
    embeddings): its `model.`-prefixed names say a class with a head was saved, and the tied head is no gap. The
    same weights saved from LlamaModel have no prefix: the base model. `check` says what it inferred, and why."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=True)
    folder = _saved(getattr(transformers, cls)(config).eval(), tmp_path / "ckpt", architectures=False,
                    tokenizer=False)
    assert main(["check", str(folder), "--stages", "cpu"]) == 0
    out = capsys.readouterr().out
    assert f"ran as {cls}, inferred: config.json names no architecture" in out and named in out, out
    tied = "tie_word_embeddings ties lm_head.weight to model.embed_tokens.weight"
    assert (tied in out) == (cls == "LlamaForCausalLM"), out
    model, weights = models.load_checkpoint(folder)
    assert type(model).__name__ == cls and weights.missing == () and weights.unexpected == ()


def test_a_candidate_class_the_config_cannot_build_is_passed_over(tmp_path, monkeypatch):
    """Inferring the class, one that refuses this config (its constructor raises, e.g. for an optional library
    it lacks) is not the checkpoint's: the class the weights match is still found."""
    from transformers import BertForMaskedLM

    folder = _saved(_tiny(BertForSequenceClassification, num_labels=3), tmp_path / "ckpt", architectures=False)

    def refuses(cls, config, **kwargs):
        raise ImportError("this head needs a library that is not installed")

    monkeypatch.setattr(BertForMaskedLM, "_from_config", classmethod(refuses))
    assert models.architecture_of(folder)[0] == "BertForSequenceClassification"


def test_a_bare_config_without_architectures_is_the_model_types_first_task(tmp_path):
    folder = tmp_path / "bare"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1,
                                                    "num_attention_heads": 4, "intermediate_size": 64}))
    name, source = models.architecture_of(folder)
    assert name == "BertLMHeadModel" and "there are no weights" in source  # bert's first task: a causal LM head


def test_no_tokenizer_gives_inputs_from_the_config_and_says_so(tmp_path):
    folder = _saved(_tiny(BertModel), tmp_path / "ckpt", tokenizer=False)
    config = models.load_config(folder)
    assert models.load_tokenizer(folder) is None
    described = inputs.describe(config, None, None)
    assert "seeded random token ids below the config's vocab_size (the checkpoint ships no tokenizer)" in described
    assert "surrogate loss" in described  # a base model has no labels
    report = neuronkit.check(folder, stages=("cpu", "eager"))
    assert report.ok and report.weights.source == "checkpoint", report.table()


def test_bin_weights_only_load_without_unpickling_code(tmp_path):
    model = _tiny(BertForSequenceClassification, num_labels=2)
    folder = _saved(model, tmp_path / "ckpt")
    (folder / "model.safetensors").unlink()
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    loaded, weights = models.load_checkpoint(folder)
    assert weights.source == "checkpoint" and not weights.missing
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())


def test_sharded_safetensors_with_an_index_load_whole(tmp_path, capsys):
    model = _tiny(BertForSequenceClassification, num_labels=2)
    folder = _saved(model, tmp_path / "ckpt", max_shard_size="40KB")
    assert len(list(folder.glob("model-*.safetensors"))) > 1 and (folder / "model.safetensors.index.json").is_file()
    loaded, weights = models.load_checkpoint(folder)
    assert weights.source == "checkpoint" and not weights.missing and not weights.unexpected
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())
    assert main(["check", str(folder), "--stages", "eager"]) == 0
    assert "-> PASS" in capsys.readouterr().out


def test_no_weights_needs_random_weights_asked_for(tmp_path, capsys):
    folder = tmp_path / "config-only"
    _saved(_tiny(BertModel), folder)
    (folder / "model.safetensors").unlink()
    assert main(["check", str(folder), "--stages", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "has no weights" in err and "--random-weights" in err and "\n" not in err
    assert main(["check", str(folder), "--stages", "cpu", "--random-weights"]) == 0
