"""The one stage model: StageResult records, their typed evidence, and the run-directory doc made from it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from neuronkit import evidence
from neuronkit.errors import NeuronkitInputError
from neuronkit.reporting.evidence import evidence_items
from neuronkit.stages import CHECK_STAGES, SCHEMA_VERSION, STAGES, STATUSES, RunDir, StageResult, recording, worst

DOC = Path(__file__).resolve().parents[1] / "docs" / "run-directory.md"


def test_run_directory_doc_is_generated_from_the_types() -> None:
    assert DOC.read_text(encoding="utf-8") == evidence.markdown(), \
        "docs/run-directory.md is stale: python -m neuronkit.evidence docs/run-directory.md"


def test_every_stage_has_one_record_type_whose_fields_carry_label_and_unit() -> None:
    assert list(evidence.EVIDENCE) == list(STAGES)
    for cls in evidence.EVIDENCE.values():
        for spec in evidence.specs(cls):
            assert spec.label and spec.unit in evidence.UNITS, (cls.__name__, spec.name)


def test_units_come_from_the_type_never_from_a_key_suffix() -> None:
    (loose,) = [i for i in evidence_items("compile", {"compile_time_s": 2.5, "other_ms": 7.0}) if not i.label]
    fields = dict(loose.fields)
    assert fields["First compiled call"] == "2.5 s"
    assert fields["other_ms"] == "7"  # an undeclared key is shown as it is, with no unit guessed


def test_a_typed_record_is_stored_as_its_dict(tmp_path: Path) -> None:
    with recording(tmp_path, "profile") as slot:
        slot["evidence"] = evidence.ProfileEvidence(distinct_ops=3, overhead=evidence.ProfilerOverhead(2.0, 1.0, 2.0))
        slot["summary"] = "three ops"
    record = RunDir(tmp_path).read("profile")
    names = [f.name for f in dataclasses.fields(evidence.ProfileEvidence)]
    assert list(record.evidence) == sorted(names) and record.evidence["overhead"]["ratio"] == 2.0
    assert slot["result"].evidence["distinct_ops"] == 3


def test_a_stage_that_raises_is_an_error_record(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), recording(tmp_path, "eager"):
        raise RuntimeError("boom")
    record = RunDir(tmp_path).read("eager")
    assert record.status == "error" and "boom" in record.summary and "Traceback" in record.error


def test_an_older_record_is_refused_in_one_line(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.write(StageResult("audit", "pass", "ok"))
    path = run.stage_path("audit")
    path.write_text(json.dumps({**json.loads(path.read_text()), "schema_version": SCHEMA_VERSION - 1}))
    with pytest.raises(NeuronkitInputError) as info:
        run.read("audit")
    assert "\n" not in str(info.value) and "run the stage again" in str(info.value)


def test_one_status_set_and_order_for_workbook_and_check_stages() -> None:
    assert worst(["pass", "warn", "skipped"]) == "warn" and worst(["fail", "error"]) == "error"
    assert worst([]) == "skipped" and STATUSES[0] == "skipped"
    for stage in (*STAGES, *CHECK_STAGES):
        assert StageResult(stage, "pass", "").ok
    with pytest.raises(ValueError, match="unknown status"):
        StageResult("eager", "crashed", "")


def test_check_stages_record_typed_evidence_the_workbook_records_extend() -> None:
    assert list(evidence.CHECK_EVIDENCE) == list(CHECK_STAGES)
    for cls in evidence.CHECK_EVIDENCE.values():
        for spec in evidence.specs(cls):
            assert spec.label and spec.unit in evidence.UNITS, (cls.__name__, spec.name)
    # one type per fact set: the workbook's records are built on the check's, never re-declare them
    assert issubclass(evidence.EagerEvidence, evidence.EagerForward)
    assert issubclass(evidence.CompileEvidence, evidence.CompileCheck)
    assert issubclass(evidence.CompileEvidence, evidence.CompileTiming)
    assert issubclass(evidence.CpuBaselineEvidence, evidence.CpuRun) and issubclass(evidence.CpuCheck, evidence.CpuRun)
    buckets = {spec.name: spec for spec in evidence.specs(evidence.CompileCheck)}["buckets"]
    assert buckets.block is evidence.BucketPlan and issubclass(evidence.BucketPlan, evidence.Bucketing)


def _check_stage(stage: str, record: object, status: str = "pass") -> StageResult:
    return StageResult(stage, status, f"{stage} done", record)


def test_the_eager_record_is_built_from_the_check_records_it_ran() -> None:
    from neuronkit.workbook import eager

    forward = evidence.EagerForward(parity=evidence.Parity(top1_agreement=1.0), fallback_ops=["aten::isin"])
    generate = evidence.EagerGeneration(generate_identical=True, fallback_ops=["aten::argmax"])
    training = evidence.EagerTraining(ok=True, steps=2)
    record = eager.evidence({"eager": _check_stage("eager", forward), "generate": _check_stage("generate", generate),
                             "train": _check_stage("train", training)})
    assert record.parity.top1_agreement == 1.0 and record.parity.generate_identical is True
    assert record.fallback_ops == ["aten::argmax", "aten::isin"]
    assert record.fallback_ops_by_phase == {"forward": ["aten::isin"], "generate": ["aten::argmax"], "train": []}
    assert record.training is training and [s.stage for s in record.stages] == ["eager", "generate", "train"]
    skipped = eager.evidence({"eager": _check_stage("eager", forward),
                              "generate": _check_stage("generate", evidence.EagerGeneration(), "skipped")})
    assert skipped.generate is None and skipped.parity.generate_identical is None and skipped.training is None


def test_the_compile_record_is_the_compile_and_timing_records_with_one_bucket_plan(tmp_path: Path) -> None:
    from neuronkit.graph_compile.buckets import suggest_buckets
    from neuronkit.workbook import torch_compile

    plan = suggest_buckets([3, 4, 4, 9, 10, 30], max_buckets=2)
    compiled = evidence.CompileCheck(graphs=1, compile_time_s=1.5, buckets=plan)
    timing = evidence.CompileTiming(eager_step_ms=4.0, compiled_step_ms=2.0, speedup=2.0, runs=3)
    with recording(tmp_path, "compile") as slot:
        slot["evidence"] = torch_compile.evidence({"compile": _check_stage("compile", compiled),
                                                   "timing": _check_stage("timing", timing)})
    assert slot["evidence"].buckets is plan and slot["evidence"].speedup == 2.0
    stored = RunDir(tmp_path).read("compile").evidence
    assert stored["graphs"] == 1 and stored["compile_time_s"] == 1.5 and stored["runs"] == 3
    assert stored["buckets"]["buckets"] == [10, 30] and stored["buckets"]["counts"] == {"10": 5, "30": 1}
    assert stored["buckets"]["alternatives"][0]["strategy"] == "pow2"


def test_a_stored_record_reads_back_as_its_type(tmp_path: Path) -> None:
    """What the report does with a record: its JSON dict back into the typed record, nested ones too."""
    original = evidence.EagerEvidence(
        parity=evidence.Parity(outputs=[evidence.ParityRow("logits", True, [1, 4], 1e-6, 1e-4)], top1_agreement=1.0),
        fallback_ops=["aten::isin"], training=evidence.EagerTraining(ok=True, cpu_losses=[2.0, 1.5]),
        neff_cache=evidence.NeffCache(hits=3), stages=[evidence.CheckStage("eager", "pass", "ok", 0.5)])
    with recording(tmp_path, "eager") as slot:
        slot["evidence"] = original
    stored = RunDir(tmp_path).read("eager").evidence
    assert evidence.load(evidence.EagerEvidence, stored) == original
    partial = evidence.load(evidence.EagerEvidence, {"parity": {"outputs": [{"name": "loss"}]}, "unknown": 1})
    assert partial.parity.outputs[0].name == "loss" and partial.parity.outputs[0].max_abs_err is None
    assert partial.training is None and partial.neff_cache == evidence.NeffCache()


def test_the_stage_comparison_reads_the_largest_error_from_the_typed_records(tmp_path: Path) -> None:
    from neuronkit.workbook import display

    run = RunDir(tmp_path)
    for stage, err in (("eager", 2e-6), ("compile", 5e-6)):
        rows = [evidence.ParityRow("logits", True, max_abs_err=err), evidence.ParityRow("ids", True, exact=True)]
        with recording(run, stage) as slot:
            slot["evidence"] = evidence.EVIDENCE[stage](parity=evidence.Parity(outputs=rows))
    frame = display.comparison(tmp_path)
    assert frame.loc["max abs error vs CPU", "eager"] == 2e-6 and frame.loc["max abs error vs CPU", "compile"] == 5e-6
    assert frame.loc["max abs error vs CPU", "audit"] == "—"


def test_starting_a_run_keeps_another_models_run_and_clears_its_own(tmp_path: Path) -> None:
    """Notebook 00 with another `model` and the default `run_dir` is refused in one line, never emptying the
    earlier run; starting the same model again drops its records and its stale report."""
    from neuronkit.workbook.flow import start_run
    from neuronkit.workbook.params import Params

    first = Params("tiny-qwen3", str(tmp_path))
    start_run(first)
    first.run.write(StageResult("environment", "pass", "ok", {}))
    (tmp_path / "report.html").write_text("<p>old</p>")
    with pytest.raises(NeuronkitInputError, match=f"^{tmp_path} holds the run of tiny-qwen3; set run_dir to a new "
                                                  "directory for tiny-bert"):
        start_run(Params("tiny-bert", str(tmp_path)))
    assert first.run.read("environment") is not None and (tmp_path / "report.html").exists()
    start_run(Params("tiny-qwen3", str(tmp_path), seq_len=32))
    assert first.run.read("environment") is None and not (tmp_path / "report.html").exists()
    assert first.run.read_params()["seq_len"] == 32
