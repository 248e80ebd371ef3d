"""The cost model (`neuronkit.cost`) and the instance catalogue: arithmetic on published figures, no model runs.

What the user sees: `neuronkit plan` with the cost options, its JSON fields, the sweep's choice, and the
model held to AWS's published rows with the band it states.
"""

from __future__ import annotations

import json
import tomllib

import pytest

from neuronkit import NeuronkitInputError, models
from neuronkit.cli import main
from neuronkit.cost import serving, sweep, training, validation
from neuronkit.cost.constants import frozen
from neuronkit.cost.shape import model_shape
from neuronkit.planner.instances import instance, instances, sources
from neuronkit.planner.plan import Layout, link
from neuronkit.resources import data_dir

ESTIMATE_FIELDS = {"sequences_per_s", "tokens_per_s", "mfu", "usd_per_hour", "usd_per_million_tokens", "band",
                   "price_source"}


@pytest.fixture(scope="module")
def published_configs(tmp_path_factory) -> dict[str, str]:
    """config.json files of the 8B and 70B models AWS's rows name (shapes only; weights never exist)."""
    folder = tmp_path_factory.mktemp("configs")
    found = {}
    for name in ("Llama-3.1-8B", "Llama-3.1-70B"):
        path = folder / f"{name}.json"
        path.write_text(json.dumps(validation.published()["models"][name]["config"]))
        found[name] = str(path)
    return found


def test_every_catalogue_figure_names_its_source_and_date():
    with (data_dir() / "trainium_hardware.toml").open("rb") as fh:
        table = tomllib.load(fh)
    known = sources()
    assert all(s.url.startswith("https://") and s.retrieved and s.file for s in known.values())
    for name, spec in table["instances"].items():
        figures = {k for k, v in spec.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        figures -= {"physical_cores_per_chip", "default_logical_nc_config"}  # the chip's, cited there
        figures |= {f"usd_per_hour.{kind}" for kind in spec.get("usd_per_hour", {})}
        assert figures <= set(spec["cite"]), (name, figures - set(spec["cite"]))
        assert set(spec["cite"].values()) <= set(known), name
        chip = table["chips"][spec["chip"]]
        assert (spec["physical_cores_per_chip"], spec["default_logical_nc_config"]) == \
            (chip["physical_cores_per_chip"], chip["default_logical_nc_config"])
    for name, chip in table["chips"].items():
        assert {"physical_cores_per_chip", "hbm_bytes_per_s", "dense_tflops"} <= set(chip["cite"]), name
    # the instances; a price only where AWS published one, and the rest say so
    assert {"trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge",
            "trn3-gen1-ultraserver"} <= set(instances())
    assert instance("trn1.32xlarge").price("on_demand").usd_per_hour == 21.50
    assert instance("trn1.32xlarge").price("reserved").usd_per_hour == 8.197
    assert instance("trn2.48xlarge").price("on_demand") is None and "price" in instance("trn2.48xlarge").missing


def test_instances_as_the_planner_sees_them():
    small, trn2, ultra = instance("trn1.2xlarge"), instance("trn2.48xlarge"), instance("trn2u.48xlarge")
    assert (small.cores, small.hbm_bytes_per_core, small.peak_flops("bfloat16")) == (2, 16 * 2**30, 95e12)
    assert (trn2.cores, trn2.hbm_bytes_per_core, trn2.logical_nc_config) == (64, 24 * 2**30, 2)
    # one chip: its two cores exchange through HBM, not a NeuronLink it does not have
    assert link(Layout(dp=2), "dp", small) == ("same chip", small.hbm_bytes_per_s_per_core)
    # a group spanning two trn2u.48xlarge stays on the UltraServer's NeuronLink; trn2.48xlarge needs EFA
    assert link(Layout(tp=64, dp=2), "dp", ultra)[0] == "NeuronLink (UltraServer)"
    assert link(Layout(tp=64, dp=2), "dp", trn2)[0] == "EFA"
    assert instance("inf2.48xlarge").serving_only and not trn2.serving_only


def test_model_shape_counts_what_pytorch_builds(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 160,
        "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8, "vocab_size": 512,
        "tie_word_embeddings": False}))
    shape = model_shape(str(config))
    assert shape.parameters == models.num_parameters(models.load_config(str(config)))
    assert shape.causal and shape.splittable and (shape.heads, shape.kv_heads, shape.head_dim) == (16, 8, 4)
    # tp=16 over 8 key/value heads replicates them: one per rank; 40 query heads over tp=32 pad to 2 per rank
    assert shape.kv_heads_per_rank(16) == 1 and shape.rank_layer(16) > shape.rank_layer(1) / 16
    assert validation._shape("Llama-2-13b").query_heads(32) == 2
    # forward FLOPs: 2 per weight per token, plus attention; split tp ways
    flops = shape.forward_flops(10, 0, logits=0)
    assert flops == 10 * 4 * 2 * (shape.layer_qo + shape.layer_kv + shape.layer_mlp)
    assert shape.forward_flops(10, 0, logits=0, tp=2) < flops


def test_held_to_aws_published_rows():
    """The frozen constants reproduce the rows they were fitted on, and the bands shipped are the spread
    of every other row (a fit or a data change that moves them fails here until `bench_cost.py --fit`)."""
    constants = frozen()
    found = validation.checks(constants)
    fitted = [c for c in found if c.fit and c.metric in ("sequences_per_s", "tpot_ms")]
    assert len(fitted) == 3 and all(abs(c.ratio - 1) < 0.01 for c in fitted), [(c.row, c.ratio) for c in fitted]
    prefill = [c for c in found if c.fit and c.metric == "ttft_ms" and "batch 1," in c.row]
    assert len(prefill) == 1 and abs(prefill[0].ratio - 1) < 0.01  # the prefill compute fraction's row
    band = validation.bands(found)
    assert band == {"training": constants.band_training, "serving": constants.band_serving,
                    "ttft": constants.band_ttft}
    assert constants.band_training <= 0.35 and constants.band_serving <= 0.50
    held = [c for c in found if not c.fit and not c.outside]
    for kind, metrics in (("training", {"sequences_per_s"}), ("serving", {"output_tokens_per_s", "tpot_ms"})):
        ratios = [c.ratio for c in held if c.kind == kind and c.metric in metrics]
        inside = sum(abs(r - 1) <= band[kind] + 1e-9 for r in ratios)
        assert inside >= 0.9 * len(ratios) and len(ratios) >= 3
    misses = validation.misses(found, band)
    assert all(m.detail for m in misses)  # every miss carries the model's own account of its figure
    assert all(len(c.outside) > 40 for c in found if c.outside)  # and every row not held says why


def test_a_mixture_of_experts_counts_its_active_experts(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 256, "num_local_experts": 8,
        "num_experts_per_tok": 2}))
    shape = model_shape(str(config))
    assert shape.parameters == models.num_parameters(models.load_config(str(config)))
    assert shape.expert_share == 0.25 and shape.splittable
    # a token multiplies 2 of 8 experts: the active layer is the attention, the router and a quarter of the experts
    active = shape.layer_qo + shape.layer_kv + shape.layer_dense + shape.layer_experts / 4
    assert shape.rank_layer(1, active=True) == active and shape.rank_layer(2) < shape.rank_layer(1)
    est = serving.estimate(shape, instance("inf2.xlarge"))
    assert any("mixture of experts" in note for note in est.notes)


def test_training_estimate_of_the_published_8b_row():
    shape = validation._shape("Llama-3.1-8B")
    trn1 = instance("trn1.32xlarge")
    est = training.estimate(shape, trn1, Layout(tp=32, dp=32),
                            training.TrainingRun(nodes=32, seq_len=8192, global_batch=1024))
    assert est.microbatches == 32 and est.global_batch == 1024
    assert est.sequences_per_s == pytest.approx(47.95, rel=0.01)
    assert est.mfu < frozen().compute_fraction  # MFU counts the whole step, compute only part of it
    assert est.usd_per_hour == 32 * 21.50 and est.budget_tokens == 20 * shape.parameters
    assert est.usd == pytest.approx(est.hours * 32 * 21.50)
    unpriced = training.estimate(shape, instance("trn2.48xlarge"), Layout(tp=8, fsdp=8),
                                 training.TrainingRun(seq_len=8192))
    assert unpriced.usd_per_hour is None and "no on-demand price" in unpriced.pricing.source
    with pytest.raises(NeuronkitInputError, match="uses 64 ranks"):
        training.estimate(shape, trn1, Layout(tp=8, fsdp=8), training.TrainingRun(seq_len=8192))


def test_cli_estimates_8b_and_70b_as_json(published_configs, capsys):
    layouts = {"Llama-3.1-8B": ["--dp", "32"], "Llama-3.1-70B": ["--dp", "4", "--pp", "8"]}  # AWS's rows'
    for name, path in published_configs.items():
        assert main(["plan", path, "--instance", "trn1.32xlarge", "--nodes", "32", "--tp", "32", *layouts[name],
                     "--seq-len", "8192", "--global-batch", "1024", "--json", "-"]) == 0
        document = json.loads(capsys.readouterr().out)
        assert ESTIMATE_FIELDS <= set(document["estimate"]), name
        assert document["estimate"]["usd_per_million_tokens"] > 0 and document["estimate"]["band"] == 0.35
        assert main(["plan", path, "--serve", "--instance", "trn1.32xlarge", "--batch", "4", "--input-len", "2048",
                     "--output-len", "512", "--json", "-"]) == 0
        served = json.loads(capsys.readouterr().out)["estimate"]
        assert {"output_tokens_per_s", "ttft_s", "tpot_s", "mfu", "usd_per_million_tokens", "band",
                "price_source"} <= set(served)
        assert main(["plan", path, "--sweep", "--seq-len", "4096", "--max-days", "60", "--json", "-"]) == 0
        best = json.loads(capsys.readouterr().out)["candidates"][0]
        assert ESTIMATE_FIELDS <= set(best["estimate"]) and best["estimate"]["budget"]["hours"] <= 60 * 24


def test_sweep_gives_a_tiny_model_the_smallest_instance(capsys):
    shape = model_shape("tiny-qwen3")
    best = sweep.train(shape, global_batch=64, seq_len=128)[0]
    assert (best.instance, best.layout.world) == ("trn1.2xlarge", 2)
    assert any("outside the published rows" in note for note in best.notes)  # and says it extrapolates
    assert main(["plan", "tiny-qwen3", "--sweep", "--seq-len", "128", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "1. 1 × trn1.2xlarge" in out and "ESTIMATES" in out
    assert out.count("note: a 140k-parameter model lies outside the published rows' 335M-70.6B") == 1
    served = sweep.serve(shape, input_len=128, output_len=64)[0]
    assert served.instance == "inf2.xlarge" and served.meets_target


def test_serving_sweep_meets_its_latency_targets():
    shape = validation._shape("Llama-3-70B")
    found = sweep.serve(shape, input_len=1024, output_len=256, max_tpot_s=0.04, max_ttft_s=2.0)
    assert found and all(e.tpot_s <= 0.04 and e.ttft_s <= 2.0 and e.fits for e in found)
    priced = [e.usd_per_million_tokens for e in found if e.usd_per_million_tokens is not None]
    assert priced == sorted(priced)


@pytest.mark.parametrize("argv, message", [
    (["--serve", "--weights", "int3"], "--weights 'int3'"),
    (["--global-batch", "0"], "global_batch must be a positive integer"),
    (["--serve", "--usd-per-hour", "-1"], "--usd-per-hour must be positive"),
    (["--serve", "--instance", "trn1.32xlarge", "--tp", "3"], "tp=3 does not divide the 32 cores"),
    (["--global-batch", "8", "--dtype", "int8"], "not one the neuron device computes in"),
    (["--sweep", "--instance", "inf2.xlarge"], "inference instances (Inferentia2)"),
    (["--global-batch", "8", "--instance", "inf2.xlarge"], "inf2.xlarge is an inference instance"),
])
def test_cost_options_bad_input_is_one_line(argv, message, capsys):
    assert main(["plan", "tiny-qwen3", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_an_encoder_is_not_served(capsys):
    assert main(["plan", "tiny-bert", "--serve"]) == 2
    assert "serving estimates are for causal language models" in capsys.readouterr().err
    assert main(["plan", "tiny-bert", "--global-batch", "64", "--seq-len", "128", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["estimate"]["tokens_per_s"] > 0
    with pytest.raises(NeuronkitInputError):
        serving.estimate(model_shape("tiny-bert"), instance("inf2.xlarge"))


def test_an_encoder_decoder_gets_its_measured_plan_but_no_estimate(tmp_path, capsys):
    """An encoder-decoder's num_hidden_layers counts its encoder alone: the cost model refuses it (BART's
    masked-LM head is no exception) rather than estimate a model without its decoder; the measured plan stays."""
    from transformers import BartConfig

    path = tmp_path / "bart"
    BartConfig(vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=4, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
               architectures=["BartForConditionalGeneration"]).save_pretrained(path)
    with pytest.raises(NeuronkitInputError, match="not an encoder-decoder model"):
        model_shape(str(path))
    assert main(["plan", str(path), "--seq-len", "16", "--instance", "trn1.2xlarge", "--dp", "2", "--json", "-"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["estimate"] is None and document["num_parameters"] == models.num_parameters(
        models.load_config(path))


def test_a_model_with_a_vision_tower_is_refused_in_words_and_the_report_says_why(tmp_path):
    """CLIP's towers have no single stack (its get_input_embeddings raises NotImplementedError, which ended
    notebook 06 in an error): the cost model refuses it, and the report's cost section carries the reason."""
    from transformers import CLIPConfig

    from neuronkit.reporting.cost import cost_section

    small = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}
    path = tmp_path / "clip"
    CLIPConfig(text_config=small | {"vocab_size": 128}, vision_config=small | {"image_size": 32, "patch_size": 8},
               architectures=["CLIPModel"]).save_pretrained(path)
    with pytest.raises(NeuronkitInputError, match="not a model with a vision tower"):
        model_shape(str(path))
    assert cost_section(tmp_path, {"model": str(path)})["unavailable"].startswith("cannot estimate CLIPModel: ")


def test_speech_and_omni_models_are_refused_in_plain_words(tmp_path):
    """Qwen2-Audio has an audio tower ("an audio tower", not "a audio tower"); Qwen2.5-Omni's class is in none
    of transformers' task mappings, which the refusal says rather than naming neuronkit's task key "other"."""
    from transformers import Qwen2_5OmniConfig, Qwen2AudioConfig

    Qwen2AudioConfig(text_config={"model_type": "qwen2", "hidden_size": 32, "num_hidden_layers": 1,
                                  "num_attention_heads": 4, "intermediate_size": 64, "vocab_size": 128},
                     audio_config={"d_model": 32, "encoder_layers": 1, "encoder_attention_heads": 4,
                                   "encoder_ffn_dim": 64, "num_mel_bins": 16},
                     architectures=["Qwen2AudioForConditionalGeneration"]).save_pretrained(tmp_path / "audio")
    with pytest.raises(NeuronkitInputError, match="not a model with an audio tower$"):
        model_shape(str(tmp_path / "audio"))
    Qwen2_5OmniConfig(architectures=["Qwen2_5OmniForConditionalGeneration"]).save_pretrained(tmp_path / "omni")
    with pytest.raises(NeuronkitInputError, match="not a model outside transformers' task mappings$"):
        model_shape(str(tmp_path / "omni"))


def test_a_cost_model_failure_is_a_line_in_the_report_not_an_error(tmp_path, monkeypatch):
    """The cost section is one part of the report: an exception the cost model did not foresee is named there
    (a bug to report), and the report is still written."""
    from neuronkit.cost import record as cost_record
    from neuronkit.reporting.cost import cost_section

    def broken(model):
        raise NotImplementedError("`get_input_embeddings` not auto-handled")

    monkeypatch.setattr(cost_record, "summarize", broken)
    line = cost_section(tmp_path, {"model": "tiny-qwen3"})["unavailable"]
    assert line == ("the cost model failed on tiny-qwen3 (NotImplementedError: `get_input_embeddings` not "
                    "auto-handled), a neuronkit bug to report")


def test_serving_runs_no_more_ranks_than_heads_and_says_when_a_length_passes_the_positions(capsys):
    """tiny-qwen3 has 4 attention heads and 512 positions: by default it is split 4 ways, not over all 64 cores
    of a trn2.48xlarge; asking for more ranks than heads is refused; a prompt past 512 positions is estimated
    with a note, and the report's default lengths are cut to the model's own."""
    from neuronkit.cost import record as cost_record

    shape = model_shape("tiny-qwen3")
    est = serving.estimate(shape, instance("trn2.48xlarge"), serving.ServingRun(input_len=64, output_len=16))
    assert (est.tp, est.replicas) == (4, 16) and not any("max_position_embeddings" in n for n in est.notes)
    assert main(["plan", "tiny-qwen3", "--serve", "--tp", "8", "--input-len", "64", "--output-len", "16"]) == 2
    assert "tp=8 exceeds tiny-qwen3's 4 attention heads" in capsys.readouterr().err
    long = serving.estimate(shape, instance("trn1.2xlarge"), serving.ServingRun(input_len=1024, output_len=256))
    assert "input_len + output_len 1280 exceeds the model's max_position_embeddings 512: the estimate counts the " \
           "time" in " ".join(long.notes)
    summary = cost_record.summarize("tiny-qwen3")
    assert summary["assumptions"]["seq_len"] == 512 and summary["assumptions"]["input_len"] + \
        summary["assumptions"]["output_len"] == 512
    assert any(n.startswith("sequence lengths cut to the model's max_position_embeddings 512") for n in summary["notes"])


def test_the_report_says_what_it_will_cost(tmp_path):
    """The report's section: without notebook 07's record it summarizes the run's model with the default
    budget; with one, the team's budget and targets; every figure labelled an estimate, with its band."""
    from neuronkit.cost import record as cost_record
    from neuronkit.reporting import report
    from neuronkit.reporting.cost import cost_section
    from test_report import passing_records, write_run

    run = write_run(tmp_path / "run", passing_records("tiny-qwen3"), {"model": "tiny-qwen3", "dtype": "float32"})
    paths = report(run)
    html, data = paths.html.read_text(), json.loads(paths.json.read_text())
    section = html[html.index('<section id="cost"'):html.index("</section>", html.index('<section id="cost"'))]
    assert "What it will cost" in section and "ESTIMATES" in section and "±35%" in section
    assert "1 × trn1.2xlarge" in section and "default budget" in section  # a tiny model: the smallest instance
    assert data["cost"]["training"][0]["instance"] == "trn1.2xlarge"
    assert data["cost"]["serving"][0]["usd_per_million_tokens"] > 0
    assert not [k for k in data["key_numbers"] if k["clock"] == "host"]
    params = {"model": "tiny-qwen3"}
    cost_record.write(run, cost_record.summarize("tiny-qwen3", tokens=1e9, max_tpot_ms=20))
    section = cost_section(run, params)
    assert section["source"].startswith("notebook 07") and section["tiles"][0]["label"] == \
        "Training 1.0 B tokens (estimate)"
    (run / cost_record.RECORD).write_text('{"schema": 1, "model": 3}')  # hand-edited junk: ignored, summarized
    assert "default budget" in cost_section(run, params)["source"]
    assert "not found" in cost_section(run, {"model": "no/such-model"})["unavailable"]
