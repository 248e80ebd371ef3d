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
