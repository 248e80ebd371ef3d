"""The Python API a notebook user expects: what `dir(neuronkit)` lists, reports that render as HTML, and
models loaded the README's way (`device_map="neuron"` / `"auto"`) accepted as they are."""

from __future__ import annotations

import logging

import pytest
from transformers import AutoModelForCausalLM

import neuronkit
from conftest import TINY_QWEN3


def test_dir_lists_the_public_api_and_nothing_else():
    listed = dir(neuronkit)
    assert {"audit", "check", "detect", "example_inputs", "run_workbook", "report"} <= set(listed)
    assert set(neuronkit.__all__) <= set(listed)
    assert not {"Any", "importlib", "torch"} & set(listed)
    for name in neuronkit.__all__:
        assert getattr(neuronkit, name) is not None


def test_api_functions_stay_functions_after_their_packages_load():
    """`neuronkit.audit` and `neuronkit.report` are functions; their packages (op_audit, reporting) have
    other names, so importing a submodule (as the CLI does) cannot rebind them."""
    import types

    import neuronkit.op_audit.cli  # noqa: F401
    import neuronkit.reporting.cli  # noqa: F401

    for name in ("audit", "report", "check", "profile", "plan"):
        assert isinstance(getattr(neuronkit, name), types.FunctionType), name


def test_reports_render_as_html_in_a_notebook():
    check_html = neuronkit.check("tiny-bert", stages=["cpu"])._repr_html_()
    audit_html = neuronkit.audit("tiny-bert")._repr_html_()
    assert check_html.startswith("<pre>") and "neuronkit check: tiny-bert" in check_html
    assert audit_html.startswith("<pre>") and "BertForMaskedLM" in audit_html


def test_a_model_loaded_onto_neuron_is_audited_and_checked_as_it_is():
    model = AutoModelForCausalLM.from_pretrained(TINY_QWEN3, device_map="neuron")
    assert next(model.parameters()).device.type == "neuron"
    report = neuronkit.audit(model)
    assert report.summary.blockers == [] and report.model.module_class == "Qwen3ForCausalLM"
    checked = neuronkit.check(model, stages=["eager"])
    assert checked.ok and checked.stage("eager").status in ("pass", "warn")


def test_device_map_auto_lands_on_neuron_without_accelerates_cuda_warning(caplog):
    with caplog.at_level(logging.WARNING):
        model = AutoModelForCausalLM.from_pretrained(TINY_QWEN3, device_map="auto")
    assert str(next(model.parameters()).device) == "neuron:0"
    assert not [r for r in caplog.records if "is not available" in r.getMessage()]


@pytest.mark.parametrize("dtype", ["int8", "float64"])
def test_dtype_is_validated_in_every_entry_point(dtype):
    with pytest.raises(neuronkit.NeuronkitInputError, match="not one the neuron device computes in"):
        neuronkit.check("tiny-bert", dtype=dtype, stages=["cpu"])
    with pytest.raises(neuronkit.NeuronkitInputError, match="not one the neuron device computes in"):
        neuronkit.audit("tiny-bert", dtype=dtype)
