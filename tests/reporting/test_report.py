"""The migration report: verdicts from records, failed/skipped stages, escaping, offline, size, JSON, CLI."""

from __future__ import annotations

import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape

from neuronkit import cli
from neuronkit.errors import NeuronkitInputError
from neuronkit.policy import load_policy
from neuronkit.reporting import ReportPaths, report
from neuronkit.reporting import render as render_module
from neuronkit.pipeline.record import STAGES, RunDir, StageResult, skipped, unmet

EVIL = "</script><script>alert(1)</script>"
NATIVE_OPS = ["mm", "addmm", "bmm", "add", "mul", "div", "sub", "softmax", "_softmax", "gelu", "embedding",
              "native_layer_norm", "cat", "where", "tanh", "pow", "mean", "sum", "rsqrt", "masked_fill",
              "index_select", "arange", "full", "clone", "view", "transpose", "permute", "expand", "slice",
              "unsqueeze", "_to_copy", "copy_", "empty", "ones", "zeros", "linear", "triu", "argsort",
              "gather", "topk", "exp", "log_softmax", "relu", "silu", "cumsum", "ne", "eq", "lt"]


# --- synthetic run directories ---------------------------------------------------------------------

def op_entry(name: str, calls: int, module: str = "transformer.h.0.attn") -> dict[str, Any]:
    """An audit op entry classified by the project's policy, as the audit would write it."""
    policy = load_policy()
    rule = policy.rule(name)
    classification = "blocked" if rule.blocked else "native" if policy.runs_natively(name) else "cpu_fallback"
    return {"op": f"aten::{name}", "calls": calls, "classification": classification,
            "category": rule.category, "dtypes": ["float32"], "shapes": [[2, 16, 64], [64, 64]],
            "module_paths": [module, "lm_head"]}


def finding_for(op: dict[str, Any]) -> dict[str, Any]:
    policy = load_policy()
    return {"category": op["category"], "severity": policy.severity[op["category"]], "op": op["op"],
            "calls": op["calls"], "module_paths": op["module_paths"],
            "message": policy.features.get(op["category"], "no native Neuron lowering"),
            "remedy": policy.remedies[op["category"]]}


def audit_evidence(ops: list[dict[str, Any]]) -> dict[str, Any]:
    findings = [finding_for(op) for op in ops if op["category"] != "native"]
    native = [op for op in ops if op["category"] == "native"]
    calls = sum(op["calls"] for op in ops)
    return {
        "summary": {"distinct_ops": len(ops), "total_calls": calls,
                    "support_pct_ops": 100 * len(native) / len(ops),
                    "support_pct_calls": 100 * sum(op["calls"] for op in native) / calls,
                    "by_category": dict(Counter(op["category"] for op in ops)),
                    "blockers": sum(f["severity"] == "blocker" for f in findings)},
        "ops": ops,
        "findings": findings,
    }


def parity(ok: bool = True) -> dict[str, Any]:
    err = 3e-6 if ok else 0.42
    return {"outputs": [{"name": "logits", "max_abs_err": err, "max_rel_err": err * 10, "atol": 1e-4,
                         "rtol": 1e-3, "ok": ok},
                        {"name": "loss", "max_abs_err": err / 3, "max_rel_err": err, "atol": 1e-4,
                         "rtol": 1e-3, "ok": ok}],
            "top1_agreement": 1.0 if ok else 0.31, "generate_identical": ok}


def passing_records(model_name: str = "sshleifer/tiny-gpt2", extra_ops: tuple[str, ...] = (),
                    n_ops: int | None = None) -> dict[str, StageResult]:
    """A full run in which every stage passed; `extra_ops` adds audited ops (fallbacks, blockers)."""
    names = NATIVE_OPS if n_ops is None else [f"{NATIVE_OPS[i % len(NATIVE_OPS)]}.v{i}" for i in range(n_ops)]
    ops = [op_entry(name, 10 + 7 * i) for i, name in enumerate(names)] + [op_entry(n, 3) for n in extra_ops]
    fallback = [op["op"] for op in ops if op["category"] == "cpu_fallback"]
    top_ops = [{"name": op["op"], "calls": op["calls"], "device_time_us": 40.0 * (i + 1),
                "cpu_time_us": 55.0 * (i + 1), "classification": op["classification"],
                "est_trn2_us": 4.0 * (i + 1), "bound": "memory" if i % 2 else "compute"}
               for i, op in enumerate(ops[:15])]
    evidence = {
        "environment": {
            "device": {"kind": "simulated", "reason": "no Neuron driver; NEURONKIT_SIMULATE=1",
                       "versions": {"python": "3.11.9", "torch": "2.13.0+cpu", "neuronkit": "0.1.0",
                                    "transformers": "5.20.0"},
                       "device_count": 2, "instance_family": "trn2", "hbm_bytes_per_core": 24 * 2**30,
                       "env": {"NEURONKIT_SIMULATE": "1"}},
            "model": {"name": model_name, "path": "data/models/tiny-gpt2", "architecture": "GPT2LMHeadModel",
                      "model_type": "gpt2", "num_parameters": 2_300_000, "dtype": "float32",
                      "estimated_bytes": 9_200_000},
            "params": {"model": model_name, "dtype": "float32", "seq_len": 16},
        },
        "cpu_baseline": {"forward_ms": 4.2, "logits_shape": [2, 16, 50257], "loss": 3.21, "threads": 4,
                         "generate": {"prompt": "Hello", "text": "Hello world", "new_tokens": 8}},
        "eager": {"parity": parity(),
                  "training": {"cpu_losses": [10.8, 10.7], "neuron_losses": [10.8, 10.7],
                               "grad_norm_cpu": 1.52, "grad_norm_neuron": 1.52, "ok": True},
                  "fallback_ops": fallback, "executed_ops": 812,
                  "neff_cache": {"hits": 780, "misses": 32, "entries": 32, "compile_s": 0.8},
                  "memory": {"allocated_bytes": 9_400_000, "max_allocated_bytes": 14_000_000,
                             "hbm_bytes_per_core": 24 * 2**30}},
        "audit": audit_evidence(ops),
        "compile": {"graphs": 1, "graph_breaks": [], "recompiles": 0, "compile_time_s": 3.1,
                    "eager_step_ms": 12.5, "compiled_step_ms": 5.0, "speedup": 2.5, "parity": parity(),
                    "stages": [{"name": "cpu", "status": "pass"}, {"name": "compiled", "status": "pass"}],
                    "buckets": {"lengths": [16, 32], "distinct_shapes": 2, "buckets": [32], "compilations": 1,
                                "padding_overhead": 0.25}},
        "profile": {"top_ops": top_ops, "trace_path": "artifacts/profile/trace.json",
                    "parquet_path": "artifacts/profile/ops.parquet",
                    "overhead": {"profiled_ms": 13.0, "plain_ms": 12.5, "ratio": 1.04},
                    "fallbacks": [{"name": n, "calls": 3, "bytes_copied": 65536} for n in fallback]},
    }
    return {stage: StageResult(stage, "pass", f"{stage} passed", evidence[stage], duration_s=1.5 + i,
                               finished_at=f"2026-05-01T10:0{i}:00+0000")
            for i, stage in enumerate(STAGES)}


def write_run(path: Path, records: dict[str, StageResult] | list[StageResult],
              params: dict[str, Any] | None = None) -> Path:
    run = RunDir(path)
    for record in (records.values() if isinstance(records, dict) else records):
        run.write(record)
    run.write_params(params if params is not None else {"model": "sshleifer/tiny-gpt2", "dtype": "float32"})
    return path


def full_run(path: Path, model_name: str = "sshleifer/tiny-gpt2",
             extra_ops: tuple[str, ...] = ("median", "nonzero"), n_ops: int | None = None) -> Path:
    """A complete, realistic run with two findings to plan for (a CPU fallback and a dynamic shape)."""
    return write_run(path, passing_records(model_name, extra_ops, n_ops),
                     {"model": model_name, "dtype": "float32", "seq_len": 16, "compile": True})


def render(run_dir: Path) -> tuple[str, dict[str, Any], ReportPaths]:
    paths = report(run_dir)
    return paths.html.read_text(encoding="utf-8"), json.loads(paths.json.read_text(encoding="utf-8")), paths


def embedded_data(html: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert match, "embedded JSON missing"
    return json.loads(match.group(1))


class Tags(HTMLParser):
    """Every start tag with its attributes, as a browser's tokenizer would see them."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any], ReportPaths]:
    """The realistic full run, rendered once for the tests that only read it."""
    return render(full_run(tmp_path_factory.mktemp("full")))


def card_html(html: str, stage: str) -> str:
    start = html.index(f'id="stage-{stage}"')
    return html[start:html.index("</details>", start)]


# --- verdicts --------------------------------------------------------------------------------------

def test_full_passing_run_is_ready(tmp_path: Path) -> None:
    html, data, _ = render(write_run(tmp_path, passing_records()))
    assert data["verdict"] == "ready"
    assert data["missing_stages"] == [] and data["blockers"] == [] and data["warnings"] == []
    assert [s["status"] for s in data["stages"].values()] == ["pass"] * len(STAGES)
    assert '<p class="verdict-label" id="verdict-label">Ready</p>' in html
    assert html.count('<img src="data:image/svg+xml;base64,') == 3  # top ops, step time, parity (one category: no chart)


def test_the_verdict_says_which_stages_ran_a_layer_slice(tmp_path: Path) -> None:
    records = passing_records()
    piece = {"full_model": False, "layers": 2, "total_layers": 16, "parameters": 384_313_344,
             "total_parameters": 1_235_814_400, "reason": "the budget"}
    for stage in ("cpu_baseline", "eager", "compile", "profile"):
        records[stage].evidence["model_slice"] = piece
    html, data, _ = render(write_run(tmp_path, records))
    assert data["ran_on"] == ("CPU baseline, Eager parity on neuron, torch.compile, Profiling ran on a layer slice: "
                              "2 of 16 blocks (384M of 1.24B parameters) — the budget. The op audit, the memory "
                              "figures and the parallel plan cover the full model.")
    assert '<p class="verdict-scope" id="ran-on">' in html and "2 of 16 blocks" in html
    whole = {**piece, "full_model": True, "layers": 16, "parameters": 1_235_814_400, "reason": "fits the budget"}
    for stage in ("cpu_baseline", "eager", "compile", "profile"):
        records[stage].evidence["model_slice"] = whole
    assert render(write_run(tmp_path / "whole", records))[1]["ran_on"] == "Every stage ran on the full model."


def test_cpu_fallbacks_and_warnings_give_ready_with_cpu_fallbacks(full_report: Any) -> None:
    html, data, _ = full_report
    assert data["verdict"] == "ready_with_cpu_fallbacks"
    assert {f["category"] for f in data["warnings"]} == {"cpu_fallback", "dynamic_shape"}
    assert any("fall back to CPU" in r and "aten::median" in r for r in data["reasons"])
    assert any("dynamic_shape" in r for r in data["reasons"])
    assert "Findings to plan for" in html and escape(load_policy().remedies["dynamic_shape"]) in html


def test_warnings_without_fallbacks_give_ready_with_caveats(tmp_path: Path) -> None:
    records = passing_records()
    records["eager"].status = "warn"
    records["eager"].summary = "tied weights came apart on .to('neuron')"
    html, data, _ = render(write_run(tmp_path, records))
    assert data["verdict"] == "ready_with_caveats"
    assert any("tied weights" in r for r in data["reasons"])
    assert "Ready, with caveats" in html


def test_blocker_finding_blocks_and_shows_its_remedy(tmp_path: Path) -> None:
    records = passing_records(extra_ops=("to_sparse", "_make_dual"))
    records["audit"].status = "fail"
    html, data, _ = render(write_run(tmp_path, records))
    assert data["verdict"] == "blocked"
    assert {(b["category"], b["op"]) for b in data["blockers"]} == {("sparse", "aten::to_sparse"),
                                                                     ("forward_ad", "aten::_make_dual")}
    assert any("sparse" in r for r in data["reasons"])
    assert not any(r.startswith("Op audit: fail") for r in data["reasons"])  # the findings already say why
    blockers = html[html.index('<section id="blockers">'):html.index('<section id="stages">')]
    for category in ("sparse", "forward_ad"):
        assert category in blockers and escape(load_policy().remedies[category]) in blockers
    assert html.index('id="verdict"') < html.index('id="blockers"') < html.index('id="stages"')


def test_a_failed_audit_without_findings_still_blocks(tmp_path: Path) -> None:
    records = passing_records()
    records["audit"] = StageResult("audit", "fail", "the audit's op table could not classify 3 ops")
    _, data, _ = render(write_run(tmp_path, records))
    assert data["verdict"] == "blocked"
    assert data["reasons"][0] == "Op audit: fail — the audit's op table could not classify 3 ops"


def test_severity_is_the_one_the_audit_recorded(tmp_path: Path) -> None:
    records = passing_records(extra_ops=("to_sparse",))
    for finding in records["audit"].evidence["findings"]:
        finding["severity"] = "warn"  # the audit's policy said warn; today's policy says blocker
    _, data, _ = render(write_run(tmp_path, records))
    assert data["verdict"] != "blocked" and not data["blockers"]
    assert any(f["op"] == "aten::to_sparse" and f["severity"] == "warn" for f in data["warnings"])


def test_a_crashed_stage_is_incomplete_not_blocked(tmp_path: Path) -> None:
    records = passing_records()
    records["eager"] = StageResult("eager", "error", "RuntimeError: injected",
                                   error="Traceback (most recent call last):\nRuntimeError: injected")
    _, data, _ = render(write_run(tmp_path, records))
    assert data["verdict"] == "incomplete"
    assert "crashed" in data["reasons"][0] and "RuntimeError: injected" in data["reasons"][0]


def test_fallbacks_inside_compiled_graphs_reach_the_verdict(tmp_path: Path) -> None:
    records = passing_records()
    records["compile"].evidence["fallback_ops"] = ["aten::histc"]
    _, data, _ = render(write_run(tmp_path, records))
    assert data["verdict"] == "ready_with_cpu_fallbacks"
    assert any(f["op"] == "aten::histc" and "compiled graph" in f["message"] for f in data["warnings"])


def test_a_record_of_an_older_schema_is_one_clear_line(tmp_path: Path) -> None:
    run = write_run(tmp_path, passing_records())
    path = RunDir(run).stage_path("eager")
    path.write_text(json.dumps({**json.loads(path.read_text()), "schema_version": 1}))
    with pytest.raises(NeuronkitInputError, match="schema version 1, from an older neuronkit.*run the stage again"):
        report(run)


def test_failed_eager_and_skipped_later_stages(tmp_path: Path) -> None:
    records = passing_records()
    summary = "logits differ from CPU beyond tolerance (max abs err 0.42)"
    records["eager"] = StageResult("eager", "fail", summary, {"parity": parity(ok=False)}, duration_s=2.0)
    reason = "skipped: eager parity failed, so later stages were not run"
    for stage in ("audit", "compile", "profile"):
        records[stage] = StageResult(stage, "skipped", "not run", error=reason)
    html, data, _ = render(write_run(tmp_path, records))
    assert data["verdict"] == "blocked"
    assert data["reasons"][0].startswith("Eager parity on neuron: fail — logits differ")
    assert {s: data["stages"][s]["status"] for s in ("eager", "audit", "compile", "profile")} == {
        "eager": "fail", "audit": "skipped", "compile": "skipped", "profile": "skipped"}
    assert data["stages"]["compile"]["error"] == reason
    eager = card_html(html, "eager")
    assert 'class="badge status-fail">fail<' in eager and summary in eager and " open>" in eager
    compile_card = card_html(html, "compile")
    assert 'status-skipped">skipped<' in compile_card and "Why it was skipped" in compile_card
    assert reason in compile_card
    assert 'id="chart-parity"' in html and 'id="chart-step_time"' not in html


def test_errored_eager_shows_the_traceback(tmp_path: Path) -> None:
    records = passing_records()
    trace = 'Traceback (most recent call last):\n  File "x.py"\nNotImplementedError: aten::_nested_tensor'
    records["eager"] = StageResult("eager", "error", "NotImplementedError: aten::_nested_tensor", error=trace)
    html, data, _ = render(write_run(tmp_path, records))
    assert data["verdict"] == "incomplete" and data["stages"]["eager"]["error"] == trace  # no verdict: not Blocked
    assert "NotImplementedError: aten::_nested_tensor" in card_html(html, "eager")


def test_only_environment_is_incomplete_and_names_the_missing_stages(tmp_path: Path) -> None:
    html, data, _ = render(write_run(tmp_path, [passing_records()["environment"]]))
    missing = ["cpu_baseline", "eager", "audit", "compile", "profile"]
    assert data["verdict"] == "incomplete" and data["missing_stages"] == missing
    assert all(data["stages"][s]["status"] == "missing" for s in missing)
    assert sum("no record" in r for r in data["reasons"]) == len(missing)
    assert "data:image/svg+xml" not in html and "No op audit in this run directory." in html
    assert 'class="badge status-missing">missing<' in card_html(html, "profile")


def test_an_errored_later_stage_makes_the_run_incomplete(tmp_path: Path) -> None:
    records = passing_records()
    records["profile"] = StageResult("profile", "error", "RuntimeError: trace export failed",
                                     error="Traceback ...\nRuntimeError: trace export failed")
    _, data, _ = render(write_run(tmp_path, records))
    assert data["verdict"] == "incomplete"
    assert data["reasons"] == ["Profiling: error (the stage crashed, so it has no verdict) — RuntimeError: trace "
                               "export failed"]


# --- safety, offline, size --------------------------------------------------------------------------

def test_hostile_strings_are_escaped_and_inert(tmp_path: Path) -> None:
    evil_op = '<img src=x onerror="alert(2)">'
    records = passing_records(model_name=EVIL)
    records["audit"].evidence["ops"][0]["op"] = evil_op
    records["eager"] = StageResult("eager", "error", EVIL, error=f"Traceback\n{EVIL}")
    records["compile"].evidence["parity"]["outputs"][0]["name"] = r"a$\notacommand{$"  # not mathtext either
    html, data, _ = render(write_run(tmp_path, records, {"model": EVIL, "note": "a & b <b>"}))
    assert EVIL not in html and evil_op not in html
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html
    tags = Tags(html).tags
    assert [t for t, _ in tags].count("script") == 2  # the embedded data and the table script, nothing else
    assert not [(t, a) for t, a in tags for name in a if name.startswith("on")]
    images = [a["src"] for t, a in tags if t == "img"]
    assert len(images) == 3 and all(src.startswith("data:image/svg+xml;base64,") for src in images)
    assert data["model"] == EVIL
    embedded = embedded_data(html)
    assert embedded["report"]["model"] == EVIL
    assert embedded["records"]["audit"]["evidence"]["ops"][0]["op"] == evil_op


def test_no_network_references(full_report: Any) -> None:
    html, _, _ = full_report
    for tag, attrs in Tags(html).tags:
        for name in ("src", "href", "action", "srcset", "poster"):
            value = attrs.get(name)
            assert value is None or value.startswith(("#", "data:")), (tag, name, value)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert "@import" not in html and not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//", html, re.I)


def test_size_budget(full_report: Any) -> None:
    html, _, paths = full_report
    assert paths.html.stat().st_size < 2 * 2**20
    assert html.count('<tr data-category=') == len(NATIVE_OPS) + 2
    assert embedded_data(html)["records"]["audit"]["evidence"]["ops"]  # the full records ride along


def test_a_huge_audit_is_capped_to_stay_within_budget(tmp_path: Path) -> None:
    html, _, paths = render(full_run(tmp_path, n_ops=2100))
    assert paths.html.stat().st_size < 2 * 2**20
    assert html.count('<tr data-category=') == 2000 and "Showing the first 2,000 of 2,102 ops" in html


def test_bulky_records_stay_out_of_the_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render_module, "EMBED_RECORDS_BYTES", 10_000)
    html, data, _ = render(full_run(tmp_path))
    embedded = embedded_data(html)
    # the page's data is the report model's; the side sections (cost, scale-out, script, compat) render as sections
    assert embedded["report"] == {k: v for k, v in data.items()
                                  if k not in ("cost", "distributed", "script", "compat")}
    assert embedded["records"] is None
    assert f"{tmp_path}/stages/" in embedded["records_omitted"]


def test_op_table_is_complete_without_javascript(full_report: Any) -> None:
    html, _, _ = full_report
    start = html.index('<table id="op-table"')
    table = html[start:html.index("</table>", start)]
    assert '<code class="op">aten::<wbr>median</code>' in table and 'data-category="cpu_fallback"' in table
    assert '<div class="controls" id="op-controls" hidden>' in html  # controls appear only when JS runs
    rows = re.findall(r'<tr data-category="([^"]+)">', table)
    assert rows.index("cpu_fallback") < rows.index("native")  # findings sort before native ops


def test_report_json_has_stable_keys(full_report: Any) -> None:
    _, data, paths = full_report
    run_dir = paths.json.parent
    assert list(data) == ["schema_version", "model", "run_dir", "device", "verdict", "verdict_label", "reasons",
                          "ran_on", "missing_stages", "stages", "blockers", "warnings", "audit", "key_numbers",
                          "next_steps", "reproduce", "cost", "compat"]
    assert "not found" in data["cost"]["unavailable"]  # a hub name, not on this machine: no estimate, and why
    assert list(data["stages"]) == list(STAGES)
    assert set(data["stages"]["eager"]) == {"title", "status", "summary", "error", "duration_s",
                                            "finished_at"}
    assert set(data["warnings"][0]) == {"category", "severity", "op", "calls", "message", "remedy",
                                        "module_paths", "phases"}
    assert all(set(k) == {"label", "value", "note", "number", "unit", "clock"} for k in data["key_numbers"])
    reproduce = data["reproduce"]
    assert reproduce["versions"]["torch"] == "2.13.0+cpu" and reproduce["params"]["seq_len"] == 16
    assert reproduce["command"] == (f"neuronkit run sshleifer/tiny-gpt2 --out {run_dir} -p compile true "
                                    "--dtype float32 --seq-len 16")


def test_the_command_repeats_what_neuronkit_run_was_given_beyond_params(tmp_path: Path) -> None:
    """`neuronkit run --inputs prompts.txt -p max_new_tokens 4` keeps the stages' options and the other
    parameters beside params.json (run_command.RUN_OPTIONS): the report's command carries them."""
    from neuronkit.run_command import RUN_OPTIONS

    run_dir = write_run(tmp_path / "run", passing_records("tiny-qwen3"), {"model": "tiny-qwen3", "dtype": "float32"})
    RunDir(run_dir).write_side_record(RUN_OPTIONS, {"prompts_file": "/data/my prompts.txt", "max_new_tokens": 4})
    command = json.loads(report(run_dir).json.read_text())["reproduce"]["command"]
    assert command == (f"neuronkit run tiny-qwen3 --out {run_dir} --dtype float32 "
                       "-p prompts_file '/data/my prompts.txt' -p max_new_tokens 4")


def test_out_dir_and_missing_run_dir(tmp_path: Path) -> None:
    paths = report(full_run(tmp_path / "run"), tmp_path / "shared")
    assert paths == ReportPaths(tmp_path / "shared" / "report.html", tmp_path / "shared" / "report.json")
    assert paths.html.exists() and not (tmp_path / "run" / "report.html").exists()
    with pytest.raises(NeuronkitInputError, match="not found"):
        report(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NeuronkitInputError, match="no stage records"):
        report(tmp_path / "empty")


# --- command line -----------------------------------------------------------------------------------

@pytest.fixture
def report_cli(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`neuronkit.cli.main` with only the report subcommand, so other subcommands' imports play no part."""
    monkeypatch.setattr(cli, "SUBCOMMANDS", {"report": cli.SUBCOMMANDS["report"]})
    return cli.main


def test_cli_exit_codes(tmp_path: Path, report_cli: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = full_run(tmp_path / "run")
    assert report_cli(["report", str(run_dir), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "verdict: Ready with CPU fallbacks" in out and str(tmp_path / "out" / "report.html") in out
    assert report_cli(["report", str(tmp_path / "missing")]) == 2
    assert "neuronkit report: error: run directory not found" in capsys.readouterr().err


# --- layout: what the first screen says ------------------------------------------------------------

def test_the_page_opens_with_the_device_banner_the_verdict_short_reasons_and_key_numbers(full_report: Any) -> None:
    html, data, _ = full_report
    assert data["device"] == "simulated" and data["key_numbers"]
    banner = html[html.index('id="device-banner"'):html.index("</p>", html.index('id="device-banner"'))]
    assert "SIMULATED" in banner and "host timing" in banner
    assert html.index('id="device-banner"') < html.index('id="verdict"') < html.index('id="key-numbers"')
    tiles = {k["label"]: k["value"] for k in data["key_numbers"]}
    assert tiles["Native op support"] == "96 %" and tiles["Blocker ops"] == "0"
    assert tiles["CPU-fallback ops"] == "1" and tiles["torch.compile"] == "1 graph"
    assert tiles["Eager vs CPU"] == "3.0e-06"  # the largest error of the eager record's outputs
    verdict = html[html.index('id="verdict"'):html.index("</section>", html.index('id="verdict"'))]
    shown = verdict[verdict.index('<ul class="reasons">'):verdict.index("</ul>")]
    assert 1 <= shown.count("<li>") <= 3


def test_long_reasons_are_cut_to_their_gist_with_the_full_text_kept(tmp_path: Path) -> None:
    records = passing_records()
    records["eager"].status = "warn"
    records["eager"].summary = ("eager: matches CPU (max abs err 4.1e-06 on logits, top-1 100%); .to('neuron') "
                                "untied 1 shared parameter group(s) (re-tied for the check; call "
                                "model.tie_weights() after moving); generate: 8 identical tokens; train: 2 SGD "
                                "steps: loss rel err 7.3e-07, grad-norm rel err 3.9e-06")
    html, data, _ = render(write_run(tmp_path, records))
    (reason,) = data["reasons"]
    gist = ("Eager parity on neuron: warn — eager: matches CPU; .to('neuron') untied 1 shared parameter "
            "group(s); generate: 8 identical …")
    assert str(escape(gist)) in html and "Every reason in full (1)" in html and str(escape(reason)) in html


def test_info_findings_are_collapsed_and_fallbacks_outside_the_audit_are_findings(tmp_path: Path) -> None:
    records = passing_records(extra_ops=("nonzero",))
    audit = records["audit"].evidence
    extra = op_entry("embedding_dense_backward", 1)
    extra["category"], extra["classification"] = "int64_emulated", "native"
    audit["ops"].append(extra)
    audit["findings"].append(finding_for(extra))
    records["eager"].evidence["fallback_ops"] = ["aten::argmax"]  # seen in generate(), not by the audit
    html, data, _ = render(write_run(tmp_path, records))
    argmax = [f for f in data["warnings"] if f["op"] == "aten::argmax"]
    assert argmax == [{"category": "cpu_fallback", "severity": "warn", "op": "aten::argmax", "calls": None,
                       "message": "fell back to CPU in the model's forward; the op audit did not record it",
                       "remedy": load_policy().remedies["cpu_fallback"], "module_paths": [],
                       "phases": ["forward"]}]
    info = html[html.index('<details class="info-findings"'):]
    assert "int64_emulated" in info and "open" not in info[:info.index(">")]
    planned = html[html.index('<section id="warnings">'):html.index('<details class="info-findings"')]
    assert "aten::<wbr>argmax" in planned and "dynamic_shape" in planned and "int64_emulated" not in planned


def test_charts_come_before_the_stages_and_timings_say_host_timing(full_report: Any) -> None:
    html, _, _ = full_report
    assert html.index('id="warnings"') < html.index('id="charts"') < html.index('id="stages"')
    for chart in ("top_ops", "step_time"):
        figure = html[html.index(f'id="chart-{chart}"'):html.index("</figure>", html.index(f'id="chart-{chart}"'))]
        assert "(host timing)" in figure
    assert "(host timing)" not in html[html.index('id="chart-parity"'):]


def test_a_chart_of_one_bar_is_left_out(tmp_path: Path) -> None:
    records = passing_records()
    audit = records["audit"].evidence
    audit["summary"]["by_category"] = {"native": len(audit["ops"])}
    html, _, _ = render(write_run(tmp_path, records))
    assert 'id="chart-op_categories"' not in html and 'id="chart-top_ops"' in html


def test_op_names_wrap_at_separators_never_mid_word() -> None:
    from neuronkit.reporting.render import op_name

    assert op_name("aten::native_layer_norm.default") == \
        "aten::<wbr>native_<wbr>layer_<wbr>norm.<wbr>default"
    assert op_name("<b>_x") == "&lt;b&gt;_<wbr>x"


def test_evidence_tables_read_name_verdict_figures_details() -> None:
    from neuronkit.reporting.evidence import evidence_items

    (table,) = [item for item in evidence_items("eager", {"parity": parity()}) if item.kind == "table"]
    assert table.columns == ["Output", "Within tolerance", "Max abs error", "Abs tolerance", "Max rel error",
                             "Rel tolerance"]  # labels and order from neuronkit.evidence.ParityRow


# --- phases: the model's path against generate()'s decoding loop -----------------------------------

def generate_only_records() -> dict[str, StageResult]:
    """A run whose only CPU fallbacks are the ones Hugging Face's decoding loop makes, as the eager stage
    records them for every causal LM (argmax and isin in greedy search)."""
    records = passing_records(extra_ops=())
    eager = records["eager"].evidence
    eager["fallback_ops"] = ["aten::argmax", "aten::isin.Tensor_Tensor"]
    eager["fallback_ops_by_phase"] = {"forward": [], "train": [], "generate": list(eager["fallback_ops"])}
    records["profile"].evidence["fallbacks"] = []
    return records


def test_fallbacks_only_generate_makes_are_named_as_such_and_do_not_make_the_verdict(tmp_path: Path) -> None:
    html, data, _ = render(write_run(tmp_path, generate_only_records()))
    assert data["verdict"] == "ready_with_caveats"
    (reason,) = data["reasons"]
    assert reason.startswith("generate() only: 2 op(s) of Hugging Face's decoding loop fall back to CPU")
    found = {f["op"]: f for f in data["warnings"]}
    assert found["aten::argmax"]["phases"] == ["generate"]
    assert "only in generate()'s decoding loop" in found["aten::isin.Tensor_Tensor"]["message"]
    tile = next(k for k in data["key_numbers"] if k["label"] == "CPU-fallback ops")
    assert (tile["number"], tile["unit"], tile["value"]) == (0, "ops", "0")
    assert tile["note"].endswith("2 more only in generate()'s decoding loop")
    assert "measure generate() latency" in data["next_steps"][0]
    assert data["next_steps"][1].startswith("Repeat this run on a Trainium instance")
    assert 'id="next-steps"' in html and html.index('id="next-steps"') < html.index('id="key-numbers"')


def test_a_fallback_in_the_model_path_still_makes_the_verdict(tmp_path: Path) -> None:
    records = generate_only_records()
    records["eager"].evidence["fallback_ops_by_phase"]["train"] = ["aten::argmax"]
    _, data, _ = render(write_run(tmp_path, records))
    assert data["verdict"] == "ready_with_cpu_fallbacks"
    assert data["reasons"][0] == ("1 op(s) fall back to CPU in the model's path (a host round trip per call): "
                                  "aten::argmax.")
    found = {f["op"]: f["phases"] for f in data["warnings"]}
    assert found == {"aten::argmax": ["train", "generate"], "aten::isin.Tensor_Tensor": ["generate"]}
    assert data["next_steps"][0].startswith("Decide on the 1 CPU-fallback op(s) in the model's path")


def test_next_steps_lead_with_blockers_and_stay_short(tmp_path: Path) -> None:
    records = passing_records(extra_ops=("median", "nonzero", "_to_sparse"))
    del records["profile"]
    _, data, _ = render(write_run(tmp_path, records))
    steps = data["next_steps"]
    assert 1 <= len(steps) <= 3
    assert steps[0].startswith("Change the sparse blocker (aten::_to_sparse)")
    assert steps[1].startswith("Re-run the stage(s) without a verdict (Profiling): neuronkit run ")


def test_a_ready_run_says_to_repeat_it_on_trainium(tmp_path: Path) -> None:
    _, data, _ = render(write_run(tmp_path, passing_records(extra_ops=())))
    assert data["verdict"] == "ready"
    assert data["next_steps"] == [f"Repeat this run on a Trainium instance with the real torch_neuronx installed "
                                  f"(neuronkit steps aside for it): {data['reproduce']['command']}"]


def test_fail_on_gates_ci_on_the_model_path_only(tmp_path: Path, report_cli: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    generate_only = write_run(tmp_path / "generate", generate_only_records())
    assert report_cli(["report", str(generate_only), "--fail-on", "cpu_fallback"]) == 0
    model_path = full_run(tmp_path / "model")
    assert report_cli(["report", str(model_path)]) == 0
    assert report_cli(["report", str(model_path), "--fail-on", "cpu_fallback,dynamic_shape"]) == 1
    assert ("findings in --fail-on categories in the model's path: cpu_fallback, dynamic_shape"
            in capsys.readouterr().err)
    assert report_cli(["report", str(model_path), "--fail-on", "no_such_thing"]) == 2
    assert "unknown --fail-on category no_such_thing" in capsys.readouterr().err


def test_a_baseline_loss_at_chance_level_is_a_caveat(tmp_path: Path) -> None:
    records = passing_records(extra_ops=())
    records["cpu_baseline"].evidence["loss"] = 10.9  # ln(50257) = 10.82: a uniform guess over the vocabulary
    _, data, _ = render(write_run(tmp_path / "chance", records))
    assert data["verdict"] == "ready_with_caveats"
    assert data["reasons"] == ["CPU baseline: loss 10.9 is within 10% of ln(50,257) = 10.8, a uniform guess's: the "
                               "weights look random or broken, so parity says nothing of the trained model."]
    records["cpu_baseline"].evidence["loss"] = 2.1
    _, data, _ = render(write_run(tmp_path / "trained", records))
    assert data["verdict"] == "ready"


def test_stages_skipped_for_a_failed_stage_are_read_as_its_consequence(tmp_path: Path) -> None:
    """Eager parity failed, so compile and profiling were skipped (the records `neuronkit run` writes): the
    verdict names eager as the cause and the two as skipped because of it, not as more stages to re-run."""
    records = passing_records()
    records["eager"] = StageResult("eager", "fail", "logits differ beyond tolerance", {"parity": parity(ok=False)})
    for stage in ("compile", "profile"):
        records[stage] = skipped(stage, unmet("eager", records["eager"]))
    _, data, _ = render(write_run(tmp_path / "blocked", records))
    assert data["verdict"] == "blocked"
    assert data["reasons"][:2] == ["Eager parity on neuron: fail — logits differ beyond tolerance",
                                   "torch.compile, Profiling: skipped: Eager parity on neuron failed, and they "
                                   "need it."]
    assert data["stages"]["compile"]["summary"] == "eager failed (fail: logits differ beyond tolerance)"
    assert not any("Re-run" in step for step in data["next_steps"])

    records["eager"] = StageResult("eager", "error", "RuntimeError: injected", error="RuntimeError: injected")
    _, data, _ = render(write_run(tmp_path / "crashed", records))
    assert data["verdict"] == "incomplete" and len(data["reasons"]) == 2
    assert data["reasons"][1] == "torch.compile, Profiling: skipped: Eager parity on neuron failed, and they need it."
    assert any(step.startswith("Re-run the stage(s) without a verdict (Eager parity on neuron)")
               for step in data["next_steps"])


@pytest.mark.subprocess
def test_neuronkit_run_starts_without_the_report_renderer(forked_python) -> None:
    """`neuronkit run` starts the kernels' fork server once its own modules are imported: the report's
    charts (matplotlib) and page renderer load when a report is rendered, not seconds before that server.
    (A process that has imported torch and the device only: conftest's forked_python.)"""
    probe = ("import sys, neuronkit.workbook.cli, neuronkit.reporting; "
             "print(sorted(m for m in ('matplotlib', 'neuronkit.reporting.charts', 'neuronkit.reporting.render') "
             "if m in sys.modules))")
    done = forked_python(probe)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr[-2000:]
