"""Families outside the zoo that a team may bring, each built offline by data/build_zoo.py's builder from
an inline recipe: the checks a new user ran on them and got a false failure from, now with the verdict the
real device gives (mission/torchneuron-behaviour.md)."""

from __future__ import annotations

import pytest

import neuronkit
from conftest import ZOO_BUILDER

RECIPES = {
    # one key/value head (multi-query attention) without enable_gqa: the fused SDPA kernel repeats it
    "falcon": {"architecture": "FalconForCausalLM", "tokenizer": "tiny-qwen3",
               "config": {"model_type": "falcon", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4}},
    # an encoder-decoder classifier: pools at the end-of-sequence token (also in the recompile probe's shorter
    # sequence), labels are classes
    "bart_classifier": {"architecture": "BartForSequenceClassification", "tokenizer": "tiny-qwen3",
                        "config": {"model_type": "bart", "d_model": 32, "encoder_layers": 1, "decoder_layers": 1,
                                   "encoder_attention_heads": 4, "decoder_attention_heads": 4,
                                   "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "max_position_embeddings": 64,
                                   "num_labels": 3}},
    # its pooler (adaptive_avg_pool1d of a transposed tensor) makes AOTAutograd replay as_strided_
    "swin": {"architecture": "SwinForImageClassification", "processor": "image",
             "config": {"model_type": "swin", "image_size": 32, "patch_size": 4, "embed_dim": 16, "depths": [1],
                        "num_heads": [2], "window_size": 4, "num_labels": 3}},
    # a text tower and a vision tower side by side: token ids and an image, trained on the surrogate loss
    "clip": {"architecture": "CLIPModel",
             "config": {"model_type": "clip", "projection_dim": 16,
                        "text_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                        "num_attention_heads": 4, "vocab_size": 128, "bos_token_id": 0,
                                        "eos_token_id": 1, "pad_token_id": 1},
                        "vision_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                          "num_attention_heads": 4, "image_size": 32, "patch_size": 8}}},
    # draws its patch mask in the forward (torch.rand): the CPU reference and the device forward draw alike,
    # as on Trainium, whose random ops are CPU fallbacks on the host's generator (S: csrc/generator.cpp)
    "vit_mae": {"architecture": "ViTMAEForPreTraining", "processor": "image",
                "config": {"model_type": "vit_mae", "hidden_size": 32, "intermediate_size": 64,
                           "num_hidden_layers": 1, "num_attention_heads": 4, "image_size": 32, "patch_size": 8,
                           "decoder_hidden_size": 32, "decoder_num_hidden_layers": 1,
                           "decoder_num_attention_heads": 4, "decoder_intermediate_size": 64}},
    # rotary embeddings as complex numbers (torch.polar): eager math on them is refused on the device, and a
    # compiled graph decomposes them (TORCH_NEURONX_COMPLEX_DECOMPOSE): its training step matches the CPU's
    "llama4_text": {"architecture": "Llama4ForCausalLM", "tokenizer": "tiny-qwen3",
                    "config": {"model_type": "llama4_text", "hidden_size": 32, "num_hidden_layers": 1,
                               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                               "intermediate_size": 64, "intermediate_size_mlp": 64, "num_local_experts": 2,
                               "num_experts_per_tok": 1}},
}
STAGES = {"falcon": ("cpu", "eager", "train"), "bart_classifier": ("cpu", "compile"),
          "swin": ("cpu", "compile"), "clip": ("cpu", "eager", "train"), "vit_mae": ("cpu", "eager", "compile"),
          "llama4_text": ("cpu", "compile")}


@pytest.mark.parametrize("name", RECIPES)
def test_check_passes_on_a_family_outside_the_zoo(name, tmp_path):
    path = ZOO_BUILDER.build(name, RECIPES[name], tmp_path)
    report = neuronkit.check(path, stages=STAGES[name], timing_runs=1, train_steps=1)
    assert report.ok and {s.status for s in report.stages} <= {"pass", "warn", "skipped"}, report.table()


def test_a_vision_model_in_bfloat16_takes_bfloat16_images(tmp_path):
    """A bfloat16 model fed float32 pixel values stops in its first convolution on any device (a dtype
    mismatch, not a device finding): the audit and the workbook's own cells get the images in the run's dtype,
    and the audit finds nothing of that."""
    import torch
    import transformers

    from neuronkit.pipeline import session
    from neuronkit.workbook import parameters

    path = ZOO_BUILDER.build("swin", RECIPES["swin"], tmp_path)
    report = neuronkit.audit(path, dtype="bfloat16")
    assert report.model.dtype == "bfloat16" and not [f for f in report.findings if f.severity == "blocker"]
    setup = session.recipe(parameters(model=str(path), run_dir=str(tmp_path / "run"), dtype="bfloat16"))
    assert setup.inputs["pixel_values"].dtype == torch.bfloat16
    model = transformers.SwinForImageClassification.from_pretrained(path, dtype=setup.dtype)
    with torch.inference_mode():  # what notebook 01's cell runs
        assert model(**setup.inputs).logits.dtype == torch.bfloat16


def test_generate_that_fails_on_the_cpu_too_is_skipped_not_the_devices_error(tmp_path):
    """A T5 config without decoder_start_token_id cannot generate() on any device: the generate step says so
    and is skipped, and eager parity, training and the compile stage still give their verdicts."""
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
                      decoder_start_token_id=None, bos_token_id=None)
    T5ForConditionalGeneration(config).save_pretrained(tmp_path / "t5")
    report = neuronkit.check(tmp_path / "t5", stages=("cpu", "eager", "generate"))
    generate = next(s for s in report.stages if s.stage == "generate")
    assert generate.status == "skipped" and generate.summary.startswith("generate() fails on the CPU too")
    assert report.ok, report.table()
