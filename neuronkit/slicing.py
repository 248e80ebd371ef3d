"""Layer slices of a checkpoint: what the stages that run a model run when the whole model does not fit.

A slice is the checkpoint's own class built from its config with fewer blocks: the embeddings, the first
K blocks of every block stack (decoder, encoder, or both), the final norm and the head. Its weights are
the checkpoint's own, read from the safetensors files for the kept keys only. K is the most blocks that
fit the budget (`data/slicing.toml`: memory available now, and a parameter ceiling for time), or what a
team forces (`layers=K`, `full_model=True`). The op audit, the memory plan and HBM figures never use a
slice: they are computed for the full model from its config.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from functools import lru_cache
from typing import Any

import torch
from transformers import PretrainedConfig, PreTrainedModel

from neuronkit import models
from neuronkit.errors import NeuronkitInputError
from neuronkit.evidence import ModelSlice
from neuronkit.resources import data_toml

@lru_cache(maxsize=1)
def rules() -> dict[str, Any]:
    """The slicing table, `neuronkit/data/slicing.toml`."""
    return data_toml("slicing.toml")


def block_counts(config: PretrainedConfig) -> dict[str, int]:
    """The config's block counts by key (one per block stack); empty when the model cannot be sliced.
    Only keys config.json itself holds: an alias a config class derives (ConvNeXt's `num_hidden_layers`
    is its stage count) is no block count."""
    stored = config.to_dict()
    return {key: value for key in rules()["layer_keys"]
            if isinstance(value := stored.get(key), int) and not isinstance(value, bool) and value > 0}


def sliced_config(config: PretrainedConfig, layers: int) -> PretrainedConfig:
    """A copy of `config` with every block stack cut to its first `layers` blocks (per-block lists too)."""
    counts = block_counts(config)
    sliced = copy.deepcopy(config)
    for key, total in counts.items():
        setattr(sliced, key, min(layers, total))
    for key in stored_per_layer_keys(config):
        value = getattr(config, key)
        if isinstance(value, list) and counts and len(value) == max(counts.values()):
            setattr(sliced, key, value[:layers])
    return sliced


def stored_per_layer_keys(config: PretrainedConfig) -> list[str]:
    """The per-block list keys (`data/slicing.toml`) that config.json itself holds, under their own name or
    the one the config class maps them to (Zamba2's `layer_types` is its stored `layers_block_type`). A list
    the config class derives from the block count (Falcon-H1's and Bamba's `layers_block_type` properties,
    read as `layer_types`) has no setter and follows the cut block count by itself."""
    stored = config.to_dict()
    return [key for key in rules()["per_layer_keys"] if config.attribute_map.get(key, key) in stored]


def embedding_parameters(config: PretrainedConfig) -> int:
    """Parameters of the input embeddings and the head (once when tied): what a slice's backward holds
    fixed (`frozen_parameters`). Built on the meta device."""
    with torch.device("meta"):
        model = models.build(models.model_class(config), config)
    return sum(p.numel() for p in frozen_parameters(model, True))


def frozen_parameters(model: torch.nn.Module, freeze: bool) -> list[torch.nn.Parameter]:
    """The input embeddings' and the head's weights when `freeze` (once each: a tied head is the
    embedding), else none: what a layer slice's backward holds fixed (on a slice they are most of its
    parameters, and their gradients would double its memory)."""
    if not freeze:
        return []
    found: dict[int, torch.nn.Parameter] = {}
    for get in ("get_input_embeddings", "get_output_embeddings"):
        module = getattr(model, get, lambda: None)()
        weight = getattr(module, "weight", None)
        if isinstance(weight, torch.nn.Parameter):
            found[id(weight)] = weight
    return list(found.values())


def need_bytes(config: PretrainedConfig, dtype: torch.dtype, sliced: bool) -> int:
    """Bytes the stages' copies of this model take at their peak (`data/slicing.toml` [budget]): the
    weights `copies` times, and the weights that take gradients `trained_copies` times more (a slice's
    embeddings and head take none)."""
    budget = rules()["budget"]
    total = models.num_parameters(config)
    trained = total - (embedding_parameters(config) if sliced else 0)
    return (budget["copies"] * total + budget["trained_copies"] * trained) * dtype.itemsize


def memory_budget(available: int | None = None) -> int:
    """Bytes the stage's copies of the slice may take: a share of the memory available now."""
    return int(rules()["budget"]["memory_fraction"] * (models._available_memory() if available is None else available))


def plan(config: PretrainedConfig, *, layers: int | None = None, full_model: bool = False,
         available: int | None = None, dtype: torch.dtype = torch.float32) -> tuple[PretrainedConfig, ModelSlice]:
    """The config a stage builds its model from, and what it is: the full model when it fits the budget
    (or `full_model`), else the largest slice that fits (or exactly `layers` blocks). Memory is counted
    for the copies the stages hold in the run's `dtype` (`need_bytes`).

    Refused in one line when nothing fits: not even one block, or a model that cannot be sliced and is
    too large whole."""
    if layers is not None and (isinstance(layers, bool) or not isinstance(layers, int) or layers < 1):
        raise NeuronkitInputError(f"layers must be a positive number of blocks, got {layers!r}")
    if layers is not None and full_model:
        raise NeuronkitInputError("choose --layers K or --full-model, not both")
    counts = block_counts(config)
    total_layers = max(counts.values()) if counts else None
    total = models.num_parameters(config)
    budget = rules()["budget"]
    memory = memory_budget(available)

    def whole(reason: str) -> tuple[PretrainedConfig, ModelSlice]:
        return config, ModelSlice(True, total_layers, total_layers, total, total, reason)

    if full_model:
        return whole("forced with --full-model")
    unsliceable = (f"{config.model_type} models cannot be sliced (no block count in config.json that the model "
                   f"is built from: {', '.join(rules()['layer_keys'])})")
    if layers is not None:
        if not counts:
            raise NeuronkitInputError(f"{unsliceable}; drop --layers to run the full model")
        if layers >= total_layers:
            return whole(f"--layers {layers} covers all {total_layers} blocks")
        sliced = sliced_config(config, layers)
        kept = models.num_parameters(sliced)
        if kept == total:  # a count the model is not built from (Swin's num_layers, derived from its `depths`)
            raise NeuronkitInputError(f"{unsliceable}; drop --layers to run the full model")
        return sliced, ModelSlice(False, layers, total_layers, kept, total, f"forced with --layers {layers}")
    whole_bytes = need_bytes(config, dtype, sliced=False)
    if whole_bytes <= memory and total <= budget["max_parameters"]:
        return whole("fits the budget")
    if counts and models.num_parameters(sliced_config(config, 1)) == total:
        counts = {}  # as above: no slice would be smaller
    if not counts:
        if whole_bytes <= memory:
            return whole(f"{unsliceable}; the full model fits memory")
        raise NeuronkitInputError(
            f"{unsliceable} and the full model "
            f"({total / 1e9:.2f}B parameters) needs {whole_bytes / 1e9:.1f} GB, over the memory budget of "
            f"{memory / 1e9:.1f} GB")
    best, best_params = 0, 0
    low, high = 1, total_layers - 1
    while low <= high:  # the largest K whose slice fits; at least one block when memory allows
        mid = (low + high) // 2
        candidate = sliced_config(config, mid)
        count = models.num_parameters(candidate)
        fits = need_bytes(candidate, dtype, sliced=True) <= memory and (mid == 1 or count <= budget["max_parameters"])
        if fits:
            best, best_params, low = mid, count, mid + 1
        else:
            high = mid - 1
    if best == 0:
        smallest = sliced_config(config, 1)
        one, need = models.num_parameters(smallest), need_bytes(smallest, dtype, sliced=True)
        raise NeuronkitInputError(
            f"even a one-block slice of this {config.model_type} model ({one / 1e9:.2f}B parameters with its "
            f"embeddings and head) needs {need / 1e9:.1f} GB in {str(dtype).removeprefix('torch.')}, over the "
            f"memory budget of "
            f"{memory / 1e9:.1f} GB; audit it weightless (neuronkit audit) and plan it (neuronkit plan)")
    reason = (f"the budget: {memory / 1e9:.1f} GB of memory for {budget['copies']} copies in "
              f"{str(dtype).removeprefix('torch.')} and {budget['trained_copies']} of the blocks' weights, at most "
              f"{budget['max_parameters'] / 1e6:.0f}M parameters for time")
    return sliced_config(config, best), ModelSlice(False, best, total_layers, best_params, total, reason)


def repeats(piece: ModelSlice, name: str, requested: int) -> int:
    """How often a stage repeats a timed step (`name`, a key of `data/slicing.toml` [slice_repeats]):
    as `requested` for the full model, at most the table's cap on a layer slice."""
    return requested if piece.full_model else min(requested, rules()["slice_repeats"][name])


def dropped_keys(config: PretrainedConfig, sliced: PretrainedConfig, cls: type) -> set[str]:
    """State-dict keys of the full model a slice leaves out (the blocks past K): not "dropped" weights."""
    if sliced is config:
        return set()
    with torch.device("meta"):
        full = set(models.build(cls, config).state_dict())
        kept = set(models.build(cls, sliced).state_dict())
    return full - kept


def load_slice(spec: models.ModelSpec, dtype: torch.dtype | str = torch.float32, *, layers: int | None = None,
               full_model: bool = False,
               random_weights: bool = False) -> tuple[PreTrainedModel, models.Weights, ModelSlice]:
    """The model a stage runs, within the budget: the full checkpoint when it fits (or `full_model`), else
    its first `layers` blocks (default: as many as fit) with the embeddings, final norm and head, read
    from the checkpoint for those keys only; and what it is (`ModelSlice`). The blocks a slice leaves
    out are not reported as dropped weights."""
    full = models.load_config(spec)
    config, piece = plan(full, layers=layers, full_model=full_model, dtype=models.as_dtype(dtype))
    model, weights = models.load_checkpoint(spec, dtype, random_weights=random_weights, config=config)
    if not piece.full_model:
        left_out = dropped_keys(full, config, models.model_class(full))
        weights = replace(weights, unexpected=tuple(k for k in weights.unexpected if k not in left_out))
    return model, weights, piece
