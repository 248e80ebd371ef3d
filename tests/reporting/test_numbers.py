"""Honest numbers (issue 22 items 4 and 5): host timings labelled as such with the Trainium estimate beside
them, one forward time per run, bucket advice labelled with its prompts, durations with units, tables that
wrap, an exact error drawn as no bar. Built from fixture records and typed constructors: no model runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from neuronkit import evidence
from neuronkit.graph_compile.buckets import BUNDLED_PROMPTS, advise_buckets
from neuronkit.reporting.charts import render_charts
from neuronkit.reporting.evidence import evidence_items
from neuronkit.reporting.model import build_model
from neuronkit.pipeline.record import RunDir
from neuronkit.units import format_duration, format_ms
from neuronkit.workbook import display
from neuronkit.stages.profile.run import overhead_text
from neuronkit.stages.compile.evidence import CompileEvidence, CompileTiming
from neuronkit.stages.cpu_baseline.evidence import CpuBaselineEvidence
from neuronkit.stages.profile.evidence import ProfileEvidence, ProfilerOverhead, TopOp
from test_report import passing_records, render, write_run


def test_durations_are_rounded_with_their_unit() -> None:
    assert format_ms(4.678123) == "4.68 ms"
    assert format_ms(18.6) == "18.6 ms"
    assert format_duration(0.000123) == "123 µs"
    assert format_duration(3.14159) == "3.14 s"
    assert format_duration(125) == "2 min 5 s"
    assert format_duration(0) == "0 s"
    assert format_duration(None) == format_ms(None) == "—"


def _key(model: Any, label: str) -> Any:
    (key,) = [k for k in model.key_numbers if k.label.startswith(label)]
    return key


def test_host_timings_stay_in_the_compile_card_and_out_of_the_headline(tmp_path: Path) -> None:
    """On the simulated device the forward time and the compiled speed-up are host timings: no headline
    tile shows them (nor a roofline sum beside them); the compile stage's card keeps them, labelled host."""
    records = passing_records()
    records["profile"].evidence["est_trn2_step_us"] = 850.0
    model = build_model(RunDir(write_run(tmp_path, records)))
    assert not [k for k in model.key_numbers if k.clock == "host" or k.label.startswith(("Forward", "Compiled"))]
    assert not any("roofline" in k.note or "×" in k.value for k in model.key_numbers)
    compile_card = next(card for card in model.stages if card.stage == "compile")
    fields = dict(field for item in compile_card.evidence for field in item.fields)
    assert fields["Eager forward on the device (median) (host)"] == "12.5 ms"
    # the tile that is an estimate says so in report.json too
    records["profile"].evidence["top_ops"][0]["nki_est_us"] = 3.0
    model = build_model(RunDir(write_run(tmp_path / "nki", records)))
    assert _key(model, "NKI kernels").clock == "estimate" and "host" not in _key(model, "NKI kernels").note


def test_on_trainium_the_forward_time_is_a_headline_measurement(tmp_path: Path) -> None:
    records = passing_records()
    records["environment"].evidence["device"]["kind"] = "real"
    model = build_model(RunDir(write_run(tmp_path / "real", records)))
    forward = _key(model, "Forward time")
    assert (forward.label, forward.value, forward.clock) == ("Forward time", "12.5 ms", "trainium")
    assert "host" not in forward.note and _key(model, "Compiled speed-up").clock == "trainium"
    eager_card = next(card for card in model.stages if card.stage == "compile")
    assert not any("(host)" in label for item in eager_card.evidence for label, _ in item.fields)


def test_measured_times_are_labelled_host_and_estimates_keep_their_label() -> None:
    record = ProfileEvidence(top_ops=[TopOp("aten::mm", 2, 40.0, 55.0, "native", 4.0, "compute")],
                                      overhead=ProfilerOverhead(13.0, 4.0, 3.25, "high"),
                                      est_trn2_step_us=8.0)
    items = evidence_items("profile", record, host=True)
    fields = {(item.label, label): value for item in items for label, value in item.fields}
    assert ("", "Estimated forward on trn2 (roofline)") not in fields  # the roofline sum leaves the cards
    assert fields["Profiler overhead", "Overhead (host)"] == "3.25×"
    assert fields["Profiler overhead", "Plain step (the overhead's baseline) (host)"] == "4 ms"
    assert fields["Profiler overhead", "Reading"] == "high"
    (top,) = [item for item in items if item.kind == "table"]
    assert top.columns[:6] == ["Op", "Calls", "Device time (host)", "Host time", "Classification",
                              "Roofline estimate on trn2"]
    plain = {label for item in evidence_items("profile", record, host=False) for label, _ in item.fields}
    assert "Overhead" in plain and not any("(host)" in label for label in plain)
    compile_fields = dict(evidence_items("compile", CompileTiming(eager_step_ms=10.94, speedup=0.58),
                                         host=True)[0].fields)
    assert compile_fields["Eager forward on the device (median) (host)"] == "10.9 ms"
    assert compile_fields["Forward speed-up (host)"] == "0.58×"
    baseline = dict(evidence_items("cpu_baseline", CpuBaselineEvidence(forward_ms=55.8), host=True)[0].fields)
    assert baseline["CPU forward (median)"] == "55.8 ms"  # a CPU time says so already


def test_a_high_profiler_overhead_is_read_as_such() -> None:
    high = overhead_text({"ratio": 3.35, "reading": "high"})
    assert high.startswith("profiler overhead 3.35× (host timing): high") and "share" in high
    assert overhead_text({"ratio": 1.1, "reading": "low"}) == "profiler overhead 1.10× (host timing)"


class _Tokenizer:
    """Tokens are words, plus one special token."""

    def __call__(self, texts: list[str], add_special_tokens: bool = True) -> dict[str, list[list[int]]]:
        return {"input_ids": [[0] * (len(text.split()) + add_special_tokens) for text in texts]}


def test_bucket_advice_names_the_prompts_it_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = SimpleNamespace(max_position_embeddings=512)
    bundled = advise_buckets(_Tokenizer(), config)
    assert bundled.source == BUNDLED_PROMPTS == "the bundled sample prompts"
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("one two three\nfour five\nsix seven eight nine ten\n", encoding="utf-8")
    yours = advise_buckets(_Tokenizer(), config, prompts)
    assert yours.source == "your prompts.txt" and sorted(yours.lengths) == [3, 4, 6]
    assert yours.summary().startswith("your prompts.txt: 3 inputs")
    display.buckets(yours)
    assert capsys.readouterr().out.startswith("From your prompts.txt: 3 prompts")
    stored = evidence.load(CompileEvidence, {"buckets": dataclasses.asdict(yours)})
    fields = {label: value for item in evidence_items("compile", stored) for label, value in item.fields}
    assert fields["Prompts measured"] == "your prompts.txt"


def test_tables_wrap_instead_of_cutting_and_durations_have_units() -> None:
    remedy = "Keep the op on the CPU, or write an NKI kernel for it: " + "a long remedy " * 10
    frame = display.table([evidence.AuditFinding(op="aten::nonzero", remedy=remedy,
                                                 module_paths=["model.layers.0.self_attn.rotary_emb.inner"])],
                          ["op", "remedy", "module_paths"])
    assert remedy.strip() in frame._repr_html_() and remedy.strip() in repr(frame)
    assert "white-space: normal" in frame._repr_html_()
    assert "..." not in repr(frame[["remedy"]])  # a column taken from it wraps too
    from neuronkit.reporting.model import StageCard

    cards = display.table([StageCard("eager", "Eager", "pass", "ok", duration_s=3.14159)], ["stage", "duration_s"])
    assert cards["duration_s"].tolist() == ["3.14 s"]


def test_the_comparison_reads_the_one_forward_time_with_units(tmp_path: Path) -> None:
    records = passing_records()
    records["profile"].evidence["est_trn2_step_us"] = 850.0
    frame = display.comparison(write_run(tmp_path, records))
    row = frame.loc["forward, median (host)"]
    assert (row["cpu_baseline"], row["eager"], row["compile"]) == ("4.2 ms", "12.5 ms", "5 ms")
    assert row["profile"] == "—"  # the profiler's plain step is its overhead's baseline, not a forward time
    assert frame.loc["forward on trn2 (roofline estimate)", "profile"] == "850 µs"
    assert frame.loc["max abs error vs CPU", "eager"] == "3.00e-06"
    assert frame.loc["stage duration (host)", "environment"] == "1.5 s"


def test_an_exact_zero_error_is_no_bar(tmp_path: Path) -> None:
    rows = [{"run": "eager", "name": "logits", "max_abs_err": 3e-6, "atol": 1e-4, "ok": True},
            {"run": "eager", "name": "loss", "max_abs_err": 0.0, "atol": 1e-4, "ok": True}]
    (chart,) = render_charts({"parity": rows})
    assert "loss exact" in chart.alt and "0.00e+00" not in chart.alt
    from neuronkit.reporting.charts import _parity

    fig, _ = _parity(rows)
    ax = fig.axes[0]
    assert len(ax.patches) == 1  # the exact output has no bar
    assert ax.get_xlim()[0] >= 1e-7  # and the axis starts a decade below the smallest error, not at 1e-12


def test_the_report_page_shows_host_timings_and_the_prompts_source(tmp_path: Path) -> None:
    records = passing_records()
    records["compile"].evidence["buckets"]["source"] = BUNDLED_PROMPTS
    html, data, _ = render(write_run(tmp_path, records))
    assert not [k for k in data["key_numbers"] if k["clock"] == "host"]  # host timings: in the card only
    assert "Eager forward on the device (median) (host)" in html
    assert "Prompts measured" in html and BUNDLED_PROMPTS in html
