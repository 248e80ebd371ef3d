"""The model held once per process (`neuronkit.pipeline.session`): the runner's preflight decides the layer
slice and the example inputs once per run and hands both to the kernels, which neither plan nor build again."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from neuronkit import inputs, slicing
from neuronkit.pipeline import session
from neuronkit.pipeline.config import Params, RunConfig
from neuronkit.workbook import runner


def test_the_kernels_run_on_the_slice_and_inputs_the_runner_decided(tmp_path: Path, monkeypatch) -> None:
    params = Params("tiny-qwen3", str(tmp_path), RunConfig(seq_len=8))
    decided = runner.preflight(params)
    session.hand_over(params, decided.model_slice, decided.inputs)

    def again(*args: object, **kwargs: object) -> None:
        raise AssertionError("a kernel built the example inputs again")

    monkeypatch.setattr(slicing, "memory_budget", lambda available=None: 1)  # a kernel's own plan: nothing fits
    monkeypatch.setattr(inputs, "example_inputs", again)
    monkeypatch.setattr(session, "_LOADED", {})
    monkeypatch.setattr(session, "_EXAMPLES", {})  # a new kernel
    loaded = session.load(params)
    assert decided.model_slice.full_model and loaded.model_slice == decided.model_slice
    assert loaded.inputs.keys() == decided.inputs.keys()
    assert all(torch.equal(loaded.inputs[k], v) for k, v in decided.inputs.items())
    # another request (the same directory run by hand with another shape) plans and builds its own
    monkeypatch.undo()
    other = Params("tiny-qwen3", str(tmp_path), RunConfig(seq_len=4))
    assert session.recipe(other).inputs["input_ids"].shape[1] == 4
    assert not (tmp_path / "artifacts" / "model" / session.INPUTS_FILE).exists()  # the stale hand-over is gone


def test_a_view_for_one_check_call_shares_the_model_and_refuses_a_host_model_as_the_device_one() -> None:
    model = torch.nn.Linear(4, 2)
    held = session.Session.build(model, torch.randn(3, 4))
    view = held.using(freeze=True)
    assert view.model is held.model and view.freeze and not held.freeze
    with pytest.raises(Exception, match="device_model must be"):
        held.using(device_model=model)
