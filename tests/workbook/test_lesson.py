"""What the notebooks show a learner around a stage record (`neuronkit.workbook.lesson`): key numbers,
folded evidence, widgets with a readable text form, and a "Next" paragraph that follows the findings."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronkit.evidence import load
from neuronkit.pipeline.stage import STAGE
from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.workbook import lesson


def _result(stage: str, status: str = "pass", line: str = "done.", **evidence: object) -> StageResult:
    """A stage record as a notebook gets it: its evidence typed (`evidence` as the JSON it is stored as)."""
    return StageResult(stage=stage, status=status, summary=line, evidence=load(STAGE[stage].evidence, evidence))


def test_key_numbers_are_tiles_in_html_and_lines_in_text() -> None:
    numbers = lesson.key_numbers({"loss": "2.04", "op <name>": "aten::mm & co"})
    assert repr(numbers) == "loss: 2.04\nop <name>: aten::mm & co"
    page = numbers._repr_html_()
    assert "op &lt;name&gt;" in page and "aten::mm &amp; co" in page and "<name>" not in page


def test_folded_content_is_a_details_block_and_one_line_of_text() -> None:
    table = type("Card", (), {"_repr_html_": lambda self: "<table><tr><td>1</td></tr></table>"})()
    folded = lesson.folded(table, "Full record: eager pass <ok>")
    page = folded._repr_html_()
    assert page.startswith("<details><summary>Full record: eager pass &lt;ok&gt;</summary><table>")
    assert page.endswith("</table></details>")
    assert repr(folded).startswith("Full record: eager pass <ok> (folded")
    assert "<pre>[1, 2]</pre>" in lesson.folded([1, 2], "a list")._repr_html_()  # no HTML form: its repr


def test_a_widget_keeps_its_view_and_reads_as_its_note() -> None:
    ipywidgets = pytest.importorskip("ipywidgets")
    bundle = lesson.interactive(ipywidgets.Dropdown(options=["a", "b"]), "(a picker)")._repr_mimebundle_()
    assert bundle["text/plain"] == "(a picker)"
    assert "model_id" in bundle["application/vnd.jupyter.widget-view+json"]


def test_a_failed_demonstration_prints_one_line_and_the_notebook_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    with lesson.attempt("Training on neuron"):
        raise RuntimeError("aten::_to_sparse is not supported on neuron\n  (long explanation)")
    assert capsys.readouterr().out.splitlines() == [
        "Training on neuron failed on this model: RuntimeError: aten::_to_sparse is not supported on neuron",
        "The stage below runs the same step and records why."]
    with pytest.raises(KeyboardInterrupt), lesson.attempt("an interrupted cell"):
        raise KeyboardInterrupt  # stopping a cell by hand still stops it


def test_next_after_an_error_or_a_skip_says_to_fix_it_first() -> None:
    text = repr(lesson.next_step(_result("compile", "error", "CellTimeoutError: cell 3.")))
    assert text.startswith("**This step errored**: CellTimeoutError: cell 3.")
    assert repr(lesson.next_step(_result("audit", "skipped", "environment has no record: run notebook 00 first"))) \
        == "**This step was skipped**: environment has no record: run notebook 00 first. Run what it names first, " \
           "then this notebook again."


def test_next_after_the_environment_follows_the_device_and_the_model_size() -> None:
    gib = 2**30
    assert "No `neuron` device" in lesson.next_step(_result("environment", device={"kind": "none"})).text
    big = _result("environment", "warn", device={"kind": "simulated", "hbm_bytes_per_core": 24 * gib},
                  model={"estimated_bytes": 32 * gib})
    assert "exceed one core's HBM (24 GiB)" in lesson.next_step(big).text
    fits = _result("environment", device={"kind": "real", "hbm_bytes_per_core": 24 * gib},
                   model={"estimated_bytes": gib})
    assert "fits one core" in lesson.next_step(fits).text


def test_next_after_eager_names_where_the_fallbacks_appeared() -> None:
    generate_only = _result("eager", fallback_ops_by_phase={"forward": [], "generate": ["aten::argmax"]})
    text = lesson.next_step(generate_only).text
    assert "(generate: `aten::argmax`)" in text and "come from `generate()`" in text and "03_op_audit" in text
    in_forward = _result("eager", fallback_ops_by_phase={"forward": ["aten::isin"], "train": ["aten::isin"]})
    text = lesson.next_step(in_forward).text
    assert "forward: `aten::isin`; train: `aten::isin`" in text and "generate()" not in text
    assert "Every op ran on the device" in lesson.next_step(_result("eager", fallback_ops_by_phase={})).text
    assert "**The device disagrees with the CPU**" in lesson.next_step(_result("eager", "fail")).text


def test_next_after_the_audit_reconciles_the_eager_runs_fallbacks(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.write(_result("eager", fallback_ops=["aten::argmax"], fallback_ops_by_phase={"generate": ["aten::argmax"]}))
    native = _result("audit", summary={"blockers": [], "fallbacks": []},
                     model={"phases": ["forward", "backward", "optimizer_step"]})
    text = lesson.next_step(native, run).text
    assert text.startswith("Every audited op has a Neuron lowering.")
    assert "Notebook 02 also saw `aten::argmax` fall back inside `generate()`" in text
    traced = _result("audit", summary={"fallbacks": [{"op": "aten::argmax", "calls": 4}]},
                     model={"phases": ["forward", "generate"]})
    text = lesson.next_step(traced, run).text
    assert text.startswith("1 op(s) fall back to the CPU: `aten::argmax`") and "Notebook 02" not in text
    blocked = _result("audit", "fail", summary={"blockers": [{"op": "aten::_to_sparse", "category": "sparse"}]})
    assert lesson.next_step(blocked, run).text.startswith("**1 blocker(s)**: `aten::_to_sparse`")


def test_next_after_compile_lists_breaks_and_buckets_only_when_they_help() -> None:
    plan = {"distinct_shapes": 43, "compilations": 4, "buckets": [26, 47, 130, 175], "padding_overhead": 27.96}
    text = lesson.next_step(_result("compile", graph_breaks=[{"reason": "x"}], buckets=plan)).text
    assert text.startswith("Before serving: remove the 1 graph break(s)")
    assert "pad inputs to the buckets [26, 47, 130, 175]: 4 compilations instead of 43, for 28% extra" in text
    fixed = _result("compile", graph_breaks=[], buckets=None)
    assert lesson.next_step(fixed).text.startswith("One graph, no breaks.")


def test_next_after_profiling_puts_fallbacks_before_the_hottest_op() -> None:
    text = lesson.next_step(_result("profile", fallbacks=[{"name": "aten::isin", "calls": 3}],
                                    top_ops=[{"name": "aten::mm"}])).text
    assert text.index("`aten::isin`") < text.index("hottest op is `aten::mm`")
    assert "fallbacks" not in lesson.next_step(_result("profile", fallbacks=[], top_ops=[])).text
