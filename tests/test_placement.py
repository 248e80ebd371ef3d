"""`neuronkit.resolve_device_map`: explicit placements for "neuron", "neuron:N", "auto", ints, dicts."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig

import neuronkit
from conftest import TINY_QWEN3
from neuronkit.errors import NeuronkitInputError
from neuronkit.placement import DoesNotFitError


@pytest.mark.parametrize("spec, expected", [
    ("neuron", {"": "neuron:0"}),
    ("neuron:3", {"": "neuron:3"}),
    (torch.device("neuron", 1), {"": "neuron:1"}),
    (2, {"": "neuron:2"}),
    ("auto", {"": "neuron:0"}),
    ("cpu", {"": "cpu"}),
    ({"model.embed_tokens": "neuron", "lm_head": 0, "model.norm": "cpu"},
     {"model.embed_tokens": "neuron:0", "lm_head": "neuron:0", "model.norm": "cpu"}),
])
def test_specs_resolve(spec, expected):
    config = AutoConfig.from_pretrained(TINY_QWEN3)
    assert neuronkit.resolve_device_map(spec, config) == expected


@pytest.mark.parametrize("bad, message", [
    ("neuron:64", "only 64 neuron device"),
    ("gpu", "is not a device"),
    (3.5, "is not a device"),
    (True, "is not a device"),
])
def test_bad_specs_are_rejected_clearly(bad, message):
    with pytest.raises(NeuronkitInputError, match=message):
        neuronkit.resolve_device_map(bad)


def test_model_too_large_names_size_and_budget():
    big = AutoConfig.for_model("qwen3", hidden_size=8192, intermediate_size=28672, num_hidden_layers=64,
                               num_attention_heads=64, num_key_value_heads=8, head_dim=128, vocab_size=152064)
    with pytest.raises(DoesNotFitError, match=r"needs .* GiB of HBM but neuron:0 has .* free"):
        neuronkit.resolve_device_map("auto", big)


def test_wrong_model_type_is_rejected():
    with pytest.raises(NeuronkitInputError, match="Module or a transformers PretrainedConfig"):
        neuronkit.resolve_device_map("neuron", model_or_config="not a model")


def test_model_bytes_of_a_fake_tensor_model_reads_no_data_pointer() -> None:
    """The audit's weightless model (FakeTensorMode) is sized without touching a data pointer: torch warns
    "Accessing the data pointer of FakeTensor ... almost definitely a bug in your code" (issue 34.6)."""
    import warnings

    from torch._subclasses.fake_tensor import FakeTensorMode

    from neuronkit.placement import model_bytes

    with FakeTensorMode():
        fake = torch.nn.Linear(4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert model_bytes(fake) == model_bytes(torch.nn.Linear(4, 4)) == 80
