"""neuronkit.models: MODEL specs resolve, load offline and deterministically, and bad input fails in one line."""

from __future__ import annotations

import json
import pickle
import shutil
import time
from pathlib import Path

import pytest
import torch
from transformers import BertForMaskedLM, Qwen3ForCausalLM

from neuronkit import inputs, models
from neuronkit.errors import NeuronkitInputError
from neuronkit.policy import data_dir

TINY_QWEN3 = {
    "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 32, "intermediate_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 128,
    "max_position_embeddings": 64,
}
LLAMA_8B = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
}


def write_config(folder: Path, config: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def input_error(fn, *args, **kwargs) -> str:
    """The message of the NeuronkitInputError `fn` raises, checked to be one line."""
    with pytest.raises(NeuronkitInputError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert message and "\n" not in message
    return message


# -- resolving and loading -----------------------------------------------------------------------

def test_bundled_names_resolve_under_data_models():
    for name in models.BUNDLED_MODELS:
        assert models.resolve_model(name) == data_dir() / "models" / name


def test_config_from_directory_json_file_and_object(tmp_path):
    folder = write_config(tmp_path / "ckpt", TINY_QWEN3)
    from_dir = models.load_config(folder)
    from_file = models.load_config(folder / "config.json")
    assert from_dir.model_type == from_file.model_type == "qwen3"
    assert from_dir.hidden_size == from_file.hidden_size == 32
    assert models.load_config(from_dir) is from_dir


def test_the_model_class_is_the_checkpoints_own():
    masked = models.load_config("tiny-bert")
    assert models.model_class(models.load_config("tiny-qwen3")) is Qwen3ForCausalLM
    assert models.model_class(masked) is BertForMaskedLM and models.task_of(masked) == "masked_lm"
    for name, task in (("BertModel", "base"), ("BertForSequenceClassification", "sequence_classification"),
                       ("BertForTokenClassification", "token_classification"), ("BertForPreTraining", "pretraining"),
                       ("BertForQuestionAnswering", "question_answering"), ("BertForMultipleChoice", "multiple_choice"),
                       ("BertForNextSentencePrediction", "next_sentence_prediction")):
        config = type(masked).from_dict(masked.to_dict() | {"architectures": [name]})
        assert models.model_class(config).__name__ == name and models.task_of(config) == task
    # no architecture named (qwen3-100m ships none): the first task the model type supports
    assert models.model_class(models.load_config("qwen3-100m")) is Qwen3ForCausalLM


def test_weights_a_class_does_not_take_are_reported_not_dropped(tmp_path):
    shutil.copytree(data_dir() / "models" / "tiny-bert", tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config | {"architectures": ["BertForSequenceClassification"]}))
    model, weights = models.load_checkpoint(tmp_path / "ckpt")
    assert type(model).__name__ == "BertForSequenceClassification" and weights.source == "checkpoint"
    assert {"classifier.weight", "classifier.bias"} <= set(weights.missing)
    assert any(key.startswith("cls.predictions") for key in weights.unexpected)
    missing, dropped = weights.warnings()
    assert "missing from the checkpoint" in missing and "classifier.bias" in missing and "(dropped)" in dropped
    _, clean = models.load_checkpoint("tiny-bert")
    assert clean.warnings() == [] and models.load_checkpoint("tiny-bert", random_weights=True)[1].random


def test_parameter_count_and_bytes_match_the_built_model(tmp_path):
    config = models.load_config(write_config(tmp_path / "c", TINY_QWEN3))
    built = models.load_model(config, weights=False)
    count = sum(p.numel() for p in built.parameters())
    assert models.num_parameters(config) == count
    assert models.estimate_bytes(config, torch.float32) == 4 * count
    assert models.estimate_bytes(config, "bfloat16") == 2 * count


def test_load_model_reads_the_checkpoint_in_eval_mode():
    model = models.load_model("tiny-qwen3", dtype="bfloat16")
    assert type(model).__name__ == "Qwen3ForCausalLM" and not model.training
    assert next(model.parameters()).dtype is torch.bfloat16
    again = models.load_model("tiny-qwen3", dtype=torch.bfloat16)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))


def test_random_weights_from_a_bare_config(tmp_path):
    model = models.load_model(write_config(tmp_path / "c", TINY_QWEN3) / "config.json", weights=False)
    assert type(model).__name__ == "Qwen3ForCausalLM" and not model.training


# transformers' bars on, as outside make; huggingface_hub warns that make's HF_HUB_DISABLE_PROGRESS_BARS wins
@pytest.mark.filterwarnings("ignore:Cannot enable progress bars")
def test_a_saved_random_checkpoint_reports_random_weights_when_loaded(tmp_path, monkeypatch):
    from transformers.utils import logging as hf_logging

    bars = []  # whether each progress bar transformers opened would show (outside the tests' TQDM_DISABLE)
    monkeypatch.setattr(hf_logging, "tqdm", lambda *a, _bar=hf_logging.tqdm, **k: (
        bars.append(hf_logging.is_progress_bar_enabled()), _bar(*a, **k))[1])
    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    try:
        saved = models.save_random_checkpoint("tiny-bert", tmp_path / "random")
    finally:
        hf_logging.enable_progress_bar() if was_on else hf_logging.disable_progress_bar()
    assert bars and not any(bars), "a 'Writing model shards' bar between `neuronkit run`'s progress lines"
    assert (saved / "tokenizer.json").is_file() and models.load_tokenizer(saved) is not None
    model, weights = models.load_checkpoint(saved)
    assert type(model).__name__ == "BertForMaskedLM" and weights.random and weights.missing == ()
    assert weights.warnings()[0].startswith("random weights")


def test_too_large_is_refused_before_anything_is_allocated(tmp_path):
    folder = write_config(tmp_path / "llama8b", LLAMA_8B)
    start = time.perf_counter()
    message = input_error(models.load_model, folder, weights=False, memory_budget=16 * 10**9)
    assert time.perf_counter() - start < 10
    assert "32.1 GB" in message and "8.03B parameters" in message and "16.0 GB" in message


def test_tokenizer_when_the_checkpoint_has_one(tmp_path):
    assert models.load_tokenizer("tiny-qwen3") is not None
    assert models.load_tokenizer(write_config(tmp_path / "c", TINY_QWEN3)) is None
    assert models.load_tokenizer(tmp_path / "c" / "config.json") is None


# -- example inputs ------------------------------------------------------------------------------

def test_example_inputs_are_deterministic_and_in_vocabulary():
    config = models.load_config("tiny-qwen3")
    first = inputs.example_inputs(config, batch_size=2, seq_len=12)
    second = inputs.example_inputs(config, batch_size=2, seq_len=12)
    assert set(first) == {"input_ids", "attention_mask", "labels"}
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert first["input_ids"].shape == (2, 12) and first["input_ids"].dtype is torch.long
    assert 0 <= int(first["input_ids"].min()) and int(first["input_ids"].max()) < config.vocab_size
    assert torch.equal(first["attention_mask"], torch.ones(2, 12, dtype=torch.long))


def test_example_inputs_from_the_tokenizer_and_for_masked_lms():
    config = models.load_config("tiny-bert")
    first = inputs.example_inputs(config, models.load_tokenizer("tiny-bert"), seq_len=40)
    assert set(first) == {"input_ids", "attention_mask", "labels"}  # a masked LM reconstructs its input
    assert first["input_ids"].shape == (1, 40) and torch.equal(first["labels"], first["input_ids"])
    assert torch.equal(first["input_ids"], inputs.example_inputs(config, models.load_tokenizer("tiny-bert"),
                                                                 seq_len=40)["input_ids"])


# -- bad input: one clear line each --------------------------------------------------------------

def test_missing_path(tmp_path):
    assert "not found" in input_error(models.load_config, tmp_path / "nope")


def test_directory_without_config(tmp_path):
    assert "has no config.json" in input_error(models.load_config, tmp_path)


def test_corrupt_config(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "qwen3",')
    assert "not valid JSON" in input_error(models.load_config, tmp_path)


def test_unreadable_config(tmp_path):
    (tmp_path / "config.json").write_bytes(b"\xff\xfe\x00garbage")
    assert "cannot read" in input_error(models.load_config, tmp_path)


@pytest.mark.parametrize("content, expected", [
    ("[1, 2]", "must hold a JSON object"),
    ("{}", "has no model_type"),
    ('{"model_type": "qwen4"}', "unknown model_type 'qwen4'"),
    ('{"model_type": "qwen3", "hidden_size": "abc"}', "invalid configuration"),
])
def test_config_content_errors(tmp_path, content, expected):
    (tmp_path / "config.json").write_text(content)
    assert expected in input_error(models.load_config, tmp_path)


def test_remote_code_is_not_run_unless_asked(tmp_path):
    write_config(tmp_path, {"model_type": "my_custom", "auto_map": {"AutoConfig": "x.MyConfig"}})
    message = input_error(models.load_config, tmp_path)
    assert "custom code (auto_map), which neuronkit does not run" in message and "trust_remote_code" not in message


def test_unsupported_architecture(tmp_path):
    write_config(tmp_path, TINY_QWEN3 | {"architectures": ["Qwen3ForMaskedLM"]})
    message = input_error(models.load_model, tmp_path, weights=False)
    assert "Qwen3ForMaskedLM" in message and "not a transformers class" in message and "custom code" in message


def test_question_answering_gets_a_span(tmp_path):
    config = models.load_config(write_config(tmp_path, TINY_QWEN3 | {"architectures": ["Qwen3ForQuestionAnswering"]}))
    example = inputs.example_inputs(config, seq_len=8)
    assert set(example) == {"input_ids", "attention_mask", "start_positions", "end_positions"}
    assert (example["end_positions"] == example["start_positions"] + 1).all() and example["end_positions"].max() < 8


def test_text_and_image_towers_get_both_and_image_tokens_in_the_text_are_refused_in_one_line():
    """CLIP-style models take token ids and an image side by side (the vision config's size); a vision-language
    model that places image features at image tokens (LLaVA) needs ids and images that agree: the team's own."""
    from transformers import ClapConfig, CLIPConfig, LlavaConfig

    small = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}
    clip = CLIPConfig(text_config=small | {"vocab_size": 128}, vision_config=small | {"image_size": 24, "patch_size": 8},
                      architectures=["CLIPModel"])
    example = inputs.example_inputs(clip, batch_size=2, seq_len=8)
    assert {k: tuple(v.shape) for k, v in example.items()} == {
        "input_ids": (2, 8), "attention_mask": (2, 8), "pixel_values": (2, 3, 24, 24)}
    assert "beside a seeded random image" in inputs.describe(clip)
    assert "takes images beside its text" in input_error(inputs.example_inputs, clip, prompts=["a photo"])
    llava = LlavaConfig(text_config={"model_type": "llama"} | small, architectures=["LlavaForConditionalGeneration"])
    message = input_error(inputs.example_inputs, llava)
    assert message.startswith("LlavaForConditionalGeneration places image features at image tokens"), message
    message = input_error(inputs.example_inputs, ClapConfig(architectures=["ClapModel"]))
    assert message.startswith("ClapModel takes text and speech features together (a multimodal model)"), message


def test_not_a_config_file(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\0")
    assert "neither a checkpoint directory nor a config" in input_error(models.load_config, tmp_path / "weights.bin")


def test_no_weights_to_load(tmp_path):
    folder = write_config(tmp_path, TINY_QWEN3)
    assert "has no weights" in input_error(models.load_model, folder)


def test_truncated_safetensors(tmp_path):
    models.load_model(write_config(tmp_path / "src", TINY_QWEN3), weights=False).save_pretrained(tmp_path / "ckpt")
    weights = tmp_path / "ckpt" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert "corrupt, truncated or unsafe" in input_error(models.load_model, tmp_path / "ckpt")


class _Payload:
    """A pickle that would create a file when unpickled without weights_only."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_pickle_payload_never_runs_and_a_truncated_bin_is_one_line(tmp_path):
    folder = write_config(tmp_path / "ckpt", TINY_QWEN3)
    marker = tmp_path / "payload-ran"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"w": _Payload(marker)}))
    assert "pytorch_model.bin is corrupt, truncated or unsafe" in input_error(models.load_model, folder)
    assert not marker.exists()
    torch.save(models.load_model(folder, weights=False).state_dict(), folder / "pytorch_model.bin")
    data = (folder / "pytorch_model.bin").read_bytes()
    (folder / "pytorch_model.bin").write_bytes(data[: len(data) // 2])
    assert "corrupt, truncated or unsafe" in input_error(models.load_model, folder)


def test_a_config_that_does_not_match_the_weights_is_one_line(tmp_path):
    models.load_model(write_config(tmp_path / "src", TINY_QWEN3), weights=False).save_pretrained(tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config | {"intermediate_size": 48}))
    message = input_error(models.load_model, tmp_path / "ckpt")
    assert "has shape" in message and "mlp" in message


@pytest.mark.parametrize("dtype", ["int8", "complex64", "float8_e4m3fn", torch.float64])
def test_only_the_dtypes_the_device_computes_in(dtype):
    assert "not one the neuron device computes in" in input_error(models.compute_dtype, dtype)


@pytest.mark.parametrize("kwargs", [{"seq_len": "abc"}, {"seq_len": 0}, {"batch_size": 1.5}, {"seq_len": True},
                                    {"seq_len": 10_000}])
def test_wrong_parameter_values(kwargs):
    message = input_error(inputs.example_inputs, models.load_config("tiny-qwen3"), **kwargs)
    assert next(iter(kwargs)) in message


def test_wrong_spec_and_dtype_types():
    assert "MODEL must be a path" in input_error(models.resolve_model, 42)
    assert "unknown dtype" in input_error(models.load_model, "tiny-qwen3", dtype="float33")
