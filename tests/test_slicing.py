"""Layer slices (neuronkit.slicing): the stages that run a model run the first K blocks of the real
checkpoint when the whole model does not fit, say so, and read each checkpoint file once per kernel."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import safetensors
import torch
from safetensors import safe_open

import neuronkit.cli
from neuronkit import inputs, models, slicing
from neuronkit.calling import call
from neuronkit.errors import NeuronkitInputError


def _budget_for(config, layers: int) -> int:
    """Memory available for which exactly `layers` blocks fit the slicing budget."""
    need = slicing.need_bytes(slicing.sliced_config(config, layers), torch.float32, sliced=True)
    return int(need / slicing.rules()["budget"]["memory_fraction"]) + 1


def test_a_slice_is_the_first_blocks_with_the_checkpoints_own_weights(zoo):
    path = zoo["llama"]
    model, weights, piece = slicing.load_slice(path, layers=1)
    assert len(model.model.layers) == 1 and model.config.num_hidden_layers == 1
    assert (piece.full_model, piece.layers, piece.total_layers) == (False, 1, 2)
    assert piece.parameters < piece.total_parameters == models.num_parameters(models.load_config(path))
    assert weights.warnings() == []  # the blocks left out are not "dropped" weights
    state = model.state_dict()
    with safe_open(str(path / "model.safetensors"), framework="pt") as fh:
        for key in ("model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight", "model.norm.weight"):
            assert torch.equal(state[key], fh.get_tensor(key))
        assert not any(key.startswith("model.layers.1.") for key in state)
    assert piece.describe().startswith("a layer slice: 1 of 2 blocks (")


@pytest.mark.parametrize("name, stacks", [
    ("mixtral", {"num_hidden_layers": 1}),                       # MoE decoder
    ("bert_classifier", {"num_hidden_layers": 1}),               # encoder-only
    ("t5", {"num_layers": 1, "num_decoder_layers": 1}),          # encoder-decoder: both stacks cut
    ("vit", {"num_hidden_layers": 1}),                           # vision
])
def test_every_sliceable_family_runs_its_slice(zoo, name, stacks):
    model, weights, piece = slicing.load_slice(zoo[name], layers=1)
    assert {key: getattr(model.config, key) for key in stacks} == stacks
    assert not piece.full_model and weights.warnings() == []
    example = inputs.example_inputs(model.config, models.load_tokenizer(zoo[name]), 1, 8,
                                    processor=inputs.processor_config(zoo[name]))
    with torch.no_grad():
        assert torch.isfinite(call(model, example).logits).all()


def test_layers_covering_every_block_is_the_full_model(zoo):
    _, _, piece = slicing.load_slice(zoo["whisper"], layers=1)  # speech: one encoder and one decoder block
    assert piece.full_model and piece.layers == piece.total_layers == 1


def test_the_budget_picks_the_most_blocks_that_fit(zoo):
    config = models.load_config(zoo["llama"])
    sliced, piece = slicing.plan(config, available=_budget_for(config, 1))
    assert sliced.num_hidden_layers == piece.layers == 1 and "budget" in piece.reason
    whole, piece = slicing.plan(config)  # a tiny model fits whole
    assert whole is config and piece.full_model and piece.reason == "fits the budget"
    whole, piece = slicing.plan(config, full_model=True, available=_budget_for(config, 1))
    assert whole is config and "--full-model" in piece.reason


def test_a_llama_3_8b_shape_runs_a_one_block_slice_within_8_gb():
    """Weightless (config only, built on the meta device): a bfloat16 run's copies of a one-block slice of
    Llama-3-8B (1.27B parameters, 1.05B of them the embeddings and untied head) take under 8 GB; the
    float32 run of the same slice does not fit that budget."""
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False, head_dim=128)
    available = int(8e9 / slicing.rules()["budget"]["memory_fraction"])  # a budget of 8 GB
    sliced, piece = slicing.plan(config, available=available, dtype=torch.bfloat16)
    assert (piece.layers, piece.total_layers) == (1, 32) and 1.2e9 < piece.parameters < 1.3e9
    assert slicing.need_bytes(sliced, torch.bfloat16, sliced=True) < 6.5e9
    assert "bfloat16" in piece.reason
    with pytest.raises(NeuronkitInputError, match=r"even a one-block slice .* in float32"):
        slicing.plan(config, available=available, dtype=torch.float32)


def test_a_slice_caps_the_timed_repetitions_not_the_full_model():
    from neuronkit.evidence import ModelSlice

    cap = slicing.rules()["slice_repeats"]["compile_timing_runs"]
    assert slicing.repeats(ModelSlice(False, 1, 32), "compile_timing_runs", 50) == cap < 50
    assert slicing.repeats(ModelSlice(False, 1, 32), "compile_timing_runs", 1) == 1
    assert slicing.repeats(ModelSlice(), "compile_timing_runs", 50) == 50


def test_what_cannot_be_sliced_or_fit_is_one_line(zoo):
    convnext = models.load_config(zoo["convnext"])  # stages of `depths`, no block count
    assert slicing.plan(convnext)[1].full_model
    for kwargs in ({"layers": 1}, {"available": 1000}):
        with pytest.raises(NeuronkitInputError, match="cannot be sliced") as info:
            slicing.plan(convnext, **kwargs)
        assert "\n" not in str(info.value)
    with pytest.raises(NeuronkitInputError, match="even a one-block slice"):
        slicing.plan(models.load_config(zoo["llama"]), available=1000)
    with pytest.raises(NeuronkitInputError, match="not both"):
        slicing.plan(convnext, layers=1, full_model=True)


def test_per_block_lists_are_cut_where_config_json_holds_them():
    """Zamba2 stores its per-block list as `layers_block_type` (read as `layer_types`): it is cut with the block
    count. Bamba derives `layer_types` from the block count (a property with no setter): it follows the cut."""
    from transformers import BambaConfig, Zamba2Config

    bamba = BambaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        mamba_n_heads=4, mamba_d_head=16, attn_layer_indices=[1])
    assert slicing.sliced_config(bamba, 1).layer_types == ["linear_attention"]
    zamba = Zamba2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mamba_headdim=8,
                         layers_block_type=["mamba", "hybrid"])
    assert slicing.sliced_config(zamba, 1).layers_block_type == zamba.layers_block_type[:1] != zamba.layers_block_type


def test_a_block_count_the_model_is_not_built_from_is_no_slice():
    """Swin's config.json stores num_layers, but the model is built from its `depths`: cutting num_layers
    changes nothing, so a slice would claim '1 of 2 blocks' of the whole model. It is refused like ConvNeXt."""
    from transformers import SwinConfig

    swin = SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4)
    assert slicing.block_counts(swin) == {"num_layers": 2}
    with pytest.raises(NeuronkitInputError, match="swin models cannot be sliced .* that the model is built from"):
        slicing.plan(swin, layers=1)
    with pytest.raises(NeuronkitInputError, match="swin models cannot be sliced"):
        slicing.plan(swin, available=1000)
    assert slicing.plan(swin)[1].full_model


def test_check_says_it_ran_a_slice(zoo, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(neuronkit.cli, "SUBCOMMANDS", {"check": neuronkit.cli.SUBCOMMANDS["check"]})
    out = tmp_path / "check.json"
    assert neuronkit.cli.main(["check", str(zoo["llama"]), "--layers", "1", "--stages", "eager",
                               "--json", str(out)]) == 0
    assert "ran on a layer slice: 1 of 2 blocks" in capsys.readouterr().out
    assert json.loads(out.read_text())["model_slice"]["layers"] == 1


def test_the_run_command_and_parameters_carry_the_slice(tmp_path):
    from neuronkit.run_command import run_command
    from neuronkit.workbook.params import parameters

    assert run_command("m", "o", {"dtype": "float32", "layers": 2, "full_model": False}) == \
        "neuronkit run m --out o --dtype float32 --layers 2"
    assert run_command("m", "o", {"layers": 0, "full_model": True}) == "neuronkit run m --out o --full-model"
    assert parameters("tiny-qwen3", str(tmp_path), layers=1).config.layers == 1
    for bad, message in (({"layers": -1}, "layers must be 0"), ({"full_model": "yes"}, "full_model must be"),
                         ({"layers": 1, "full_model": True}, "not both")):
        with pytest.raises(NeuronkitInputError, match=message):
            parameters("tiny-qwen3", str(tmp_path), **bad)


def test_every_kernel_of_a_run_runs_the_slice_the_first_one_planned(zoo, tmp_path, monkeypatch):
    from neuronkit.pipeline import session
    from neuronkit.workbook.params import parameters

    params = parameters(str(zoo["llama"]), str(tmp_path / "run"))
    config = models.load_config(zoo["llama"])
    monkeypatch.setattr(slicing, "memory_budget", lambda available=None: _budget_for(config, 1) // 2)
    first = session.run_slice(params)  # little memory free: one block
    monkeypatch.setattr(slicing, "memory_budget", lambda available=None: 10**12)
    session._LOADED.clear()  # a later kernel, with plenty free: still the run's one block
    subject = session.load(params)
    assert first.layers == subject.model_slice.layers == subject.hf_config.num_hidden_layers == 1
    assert session.run_slice(parameters(str(zoo["llama"]), str(tmp_path / "run"), full_model=True)).full_model


@pytest.fixture
def safetensors_reads(monkeypatch):
    """Per file, how many times tensors were read from it (one open that reads any tensor counts once)."""
    reads: Counter[str] = Counter()
    real = safetensors.safe_open

    class Counted:
        def __init__(self, filename, *args, **kwargs):
            self._handle, self._name, self._read = real(filename, *args, **kwargs), Path(filename).name, False

        def __enter__(self):
            self._handle.__enter__()
            return self

        def __exit__(self, *exc):
            return self._handle.__exit__(*exc)

        def _count(self):
            if not self._read:
                self._read = True
                reads[self._name] += 1

        def get_tensor(self, key):
            self._count()
            return self._handle.get_tensor(key)

        def get_slice(self, key):
            self._count()
            return self._handle.get_slice(key)

        def __getattr__(self, name):
            return getattr(self._handle, name)

    import sys

    for module in list(sys.modules.values()):
        if getattr(module, "safe_open", None) is real:
            monkeypatch.setattr(module, "safe_open", Counted)
    return reads


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_each_checkpoint_file_is_read_once_per_kernel(tmp_path, safetensors_reads, dtype):
    """Notebooks 01, 02 and 05 as one kernel each runs them: the notebook's own cells load the model,
    then its stage runs on the same one (the bundled model; a bfloat16 run's CPU reference runs the
    bfloat16 model under CPU autocast, no float32 second load). Notebook 04's stage reaches the model
    through the same session as 02's (left out: compiling costs seconds)."""
    from neuronkit.pipeline import session
    from neuronkit.stages.cpu_baseline import run as cpu_baseline
    from neuronkit.stages.eager import run as eager
    from neuronkit.stages.environment import run as environment
    from neuronkit.stages.profile import run as profile
    from neuronkit.workbook.params import parameters

    params = parameters(model="tiny-qwen3", run_dir=str(tmp_path / "run"), dtype=dtype)
    assert environment.run(params).ok
    for notebook in (lambda: cpu_baseline.run(params, max_new_tokens=2, timing_steps=1),
                     lambda: eager.run(params, train_steps=1, generate_tokens=2),
                     lambda: profile.run(params, steps=1, warmup=3)):
        session._LOADED.clear()  # a new kernel
        safetensors_reads.clear()
        subject = session.load(params)  # the notebook's teaching cells
        result = notebook()
        assert result.status in ("pass", "warn"), result.summary
        assert session.load(params) is subject
        checkpoint = {name: n for name, n in safetensors_reads.items() if name != "reference.safetensors"}
        assert checkpoint == {"model.safetensors": 1}  # reference.safetensors: the run's CPU reference


def test_a_model_the_notebook_cells_loaded_is_adopted_without_a_second_read(tmp_path, safetensors_reads):
    """Notebooks 01 and 02 as a learner runs them: transformers' own `from_pretrained` (on the CPU with its
    loading info, then straight onto the device), `session.adopt`, then the stage on that model: each
    kernel reads the checkpoint once. The device stage runs the learner's device model itself and drops its
    CPU copy afterwards (notebook 02's training cell gets the memory)."""
    import transformers

    from neuronkit.pipeline import session
    from neuronkit.stages.cpu_baseline import run as cpu_baseline
    from neuronkit.stages.eager import run as eager
    from neuronkit.stages.environment import run as environment
    from neuronkit.workbook.params import parameters

    params = parameters(model="tiny-qwen3", run_dir=str(tmp_path / "run"))
    assert environment.run(params).ok
    for device_map, notebook in ((None, lambda: cpu_baseline.run(params, max_new_tokens=2, timing_steps=1)),
                                 ("neuron", lambda: eager.run(params, train_steps=1, generate_tokens=2))):
        session._LOADED.clear()  # a new kernel
        safetensors_reads.clear()
        setup = session.recipe(params)
        model_class = getattr(transformers, transformers.AutoConfig.from_pretrained(setup.path).architectures[0])
        model, info = model_class.from_pretrained(setup.path, dtype=setup.dtype, device_map=device_map,
                                                  output_loading_info=True, **setup.slice_kwargs)
        subject = session.adopt(params, model, None if device_map else info)
        assert next(subject.model.parameters()).device.type == "cpu"
        assert next(model.parameters()).device.type == (device_map or "cpu")  # the learner's stays where it was
        result = notebook()
        assert result.status in ("pass", "warn"), result.summary
        checkpoint = {name: n for name, n in safetensors_reads.items() if name != "reference.safetensors"}
        assert checkpoint == {"model.safetensors": 1}
        assert subject.weights.source == "checkpoint"
        if device_map:  # the stage ran the learner's device model; the CPU copy it compared with is dropped
            assert subject.device_model is model and session._LOADED == {}
        else:
            assert session.load(params) is subject


def test_the_slice_keywords_read_only_the_kept_blocks_and_adopt_refuses_another_model(zoo, tmp_path, monkeypatch):
    """`from_pretrained(path, **slice_kwargs)` builds the run's slice and reads only its blocks' tensors;
    a model that is not the run's (the full model where a slice runs, another dtype) is refused in one line."""
    import transformers

    from neuronkit.pipeline import session
    from neuronkit.workbook.params import parameters

    read: list[str] = []  # the keys whose tensor data was read (a slice handle alone reads only the header)
    real = safetensors.safe_open

    class Sliced:
        def __init__(self, handle, key):
            self._handle, self._key = handle, key

        def __getitem__(self, index):
            read.append(self._key)
            return self._handle[index]

        def __getattr__(self, name):
            return getattr(self._handle, name)

    class Keys:
        def __init__(self, filename, *args, **kwargs):
            self._handle = real(filename, *args, **kwargs)

        def __enter__(self):
            self._handle.__enter__()
            return self

        def __exit__(self, *exc):
            return self._handle.__exit__(*exc)

        def get_tensor(self, key):
            read.append(key)
            return self._handle.get_tensor(key)

        def get_slice(self, key):
            return Sliced(self._handle.get_slice(key), key)

        def __getattr__(self, name):
            return getattr(self._handle, name)

    import sys

    params = parameters(str(zoo["llama"]), str(tmp_path / "run"), layers=1)
    setup = session.recipe(params)
    assert setup.slice_kwargs == {"num_hidden_layers": 1}
    assert setup.call("LlamaForCausalLM") == f"LlamaForCausalLM.from_pretrained({setup.path!r}, dtype=torch.float32, " \
                                             "num_hidden_layers=1)"
    for module in list(sys.modules.values()):
        if getattr(module, "safe_open", None) is real:
            monkeypatch.setattr(module, "safe_open", Keys)
    model = transformers.LlamaForCausalLM.from_pretrained(setup.path, **setup.slice_kwargs)
    assert read and not [key for key in read if ".layers.1." in key]
    assert session.adopt(params, model).model_slice.layers == 1
    full = transformers.LlamaForCausalLM.from_pretrained(setup.path)
    with pytest.raises(NeuronkitInputError, match=r"runs a layer slice: 1 of 2 blocks.*num_hidden_layers=1\)$"):
        session.adopt(params, full)
    with pytest.raises(NeuronkitInputError, match=r"is in float16; this run loads it in float32 \(from_pretrained\(..., dtype=torch.float32\)\)"):
        session.adopt(params, model.half())
