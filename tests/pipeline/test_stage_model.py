"""The one stage model: StageResult records, their typed evidence, and the run-directory doc made from it."""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import typing
from pathlib import Path

import nbformat
import pytest

import neuronkit
from neuronkit import evidence
from neuronkit.errors import NeuronkitInputError
from neuronkit.pipeline.execute import recording
from neuronkit.pipeline.record import CHECK_STAGES, SCHEMA_VERSION, STAGES, STATUSES, RunDir, StageResult, worst
from neuronkit.pipeline.stage import CHECK_STEPS, REPORT_NOTEBOOK, STAGE, STEP, WORKBOOK
from neuronkit.reporting.evidence import evidence_items
from neuronkit.stages.compile.evidence import CompileCheck, CompileEvidence, CompileTiming
from neuronkit.stages.cpu_baseline.evidence import CpuBaselineEvidence, CpuCheck, CpuRun
from neuronkit.stages.eager.evidence import EagerEvidence, EagerForward, EagerGeneration, EagerTraining, NeffCache
from neuronkit.stages.environment.evidence import EnvironmentEvidence, RunParams
from neuronkit.stages.profile.evidence import ProfileEvidence, ProfilerOverhead

DOC = Path(__file__).resolve().parents[2] / "docs" / "run-directory.md"
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_run_directory_doc_is_generated_from_the_types() -> None:
    from run_directory_doc import markdown

    assert DOC.read_text(encoding="utf-8") == markdown(), \
        "docs/run-directory.md is stale: python tests/pipeline/run_directory_doc.py docs/run-directory.md"


def test_every_stage_has_one_record_type_whose_fields_carry_label_and_unit() -> None:
    assert [stage.name for stage in WORKBOOK] == list(STAGES)
    for cls in [stage.evidence for stage in WORKBOOK] + [step.evidence for step in CHECK_STEPS]:
        for spec in evidence.specs(cls):
            assert spec.label and spec.unit in evidence.UNITS, (cls.__name__, spec.name)


def test_the_stage_table_and_the_notebooks_on_disk_agree() -> None:
    """Adding a stage is one folder, one entry (neuronkit/data/stages.toml) and one notebook: the entries, the
    folders, the notebooks and the check steps must agree, and every stage notebook runs its stage and says what
    is next."""
    numbered = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.py") if p.stem < REPORT_NOTEBOOK)
    assert [stage.notebook for stage in WORKBOOK] == numbered
    assert (NOTEBOOKS / f"{REPORT_NOTEBOOK}.py").is_file() and (NOTEBOOKS / f"{REPORT_NOTEBOOK}.ipynb").is_file()
    earlier: set[str] = set()
    for stage in WORKBOOK:
        assert (NOTEBOOKS / stage.ipynb).is_file() and set(stage.requires) <= earlier, stage.name
        source = (NOTEBOOKS / f"{stage.notebook}.py").read_text(encoding="utf-8")
        assert "result = " in source and ".run(params" in source and "lesson.next_step(result" in source
        notebook = nbformat.read(NOTEBOOKS / stage.ipynb, as_version=4)  # the cell the runner may hold back
        tagged = [c.source for c in notebook.cells if "stage" in c.metadata.get("tags", ())]
        assert len(tagged) == 1 and "result = " in tagged[0] and ".run(params" in tagged[0], stage.name
        assert "display.summary(result)" in source, stage.name
        for path in stage.checked:  # nbval's paths name fields of the stage's record type
            cls: type | None = stage.evidence
            for key in path.split("."):
                spec = {s.name: s for s in evidence.specs(cls)}[key] if cls else None
                assert spec is not None, (stage.name, path)
                cls = spec.block
        earlier.add(stage.name)
    owned = [step for stage in WORKBOOK for step in stage.steps]
    assert sorted(owned) == sorted(STEP) and len(owned) == len(set(owned)), "each check step belongs to one stage"
    for stage in WORKBOOK:  # its folder: a `run`, and a body for each check step it owns
        assert stage.module == f"neuronkit.stages.{stage.name}" and stage.part("run") is not None, stage.name
        assert all(callable(STEP[step].body()) for step in stage.steps), stage.name
    assert all(step.requires is None or step.requires in STEP for step in CHECK_STEPS)
    assert [stage.number for stage in WORKBOOK] == sorted({stage.number for stage in WORKBOOK})


def _literals_naming(names: set[str], tree: ast.AST) -> list[int]:
    """Lines of dict, tuple, list and set literals that name every one of `names` as string constants."""
    found = []
    for node in ast.walk(tree):
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if isinstance(node, (ast.Dict, ast.Tuple, ast.List, ast.Set)) and items is not None:
            strings = {n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)}
            if names <= strings:
                found.append(node.lineno)
    return found


def test_no_module_keeps_a_stage_table_of_its_own() -> None:
    """The runner, the flow, the report, lesson, nbval and check() read the one table: no literal in the
    package or the notebooks lists every workbook stage, or every check step, beside it."""
    tables = {}
    for path, tree in _sources().items():
        for names in ({stage.name for stage in WORKBOOK}, set(STEP)):
            if lines := _literals_naming(names, tree):
                tables[str(path)] = lines
    assert tables == {}


@functools.cache
def _sources() -> dict[Path, ast.AST]:
    """The package's modules and the numbered notebooks' sources, parsed once for the checks below."""
    paths = [*Path(neuronkit.__file__).parent.rglob("*.py"), *NOTEBOOKS.glob("[0-9][0-9]_*.py")]
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in paths}


def test_a_stage_is_read_from_the_table_by_every_consumer() -> None:
    from neuronkit.reporting.model import build_model  # noqa: F401 - the report reads titles and blocking
    from neuronkit.workbook import lesson, runner

    assert runner.NOTEBOOKS == (*(stage.ipynb for stage in WORKBOOK), f"{REPORT_NOTEBOOK}.ipynb")
    assert all(hasattr(stage.part("run"), "next_step") for stage in WORKBOOK)  # every stage's "Next" paragraph
    assert lesson.next_step(StageResult("profile", "pass", "", STAGE["profile"].evidence())).text.endswith(f"Open **{REPORT_NOTEBOOK}** for the "
                                                                             "verdict across all stages.")
    assert CHECK_STAGES == tuple(STEP)
    assert all(callable(step.body()) for step in CHECK_STEPS)  # a body for every check step the table lists


def test_units_come_from_the_type_never_from_a_key_suffix() -> None:
    (loose,) = [i for i in evidence_items("compile", {"compile_time_s": 2.5, "other_ms": 7.0}) if not i.label]
    fields = dict(loose.fields)
    assert fields["First compiled call (includes compilation) (host)"] == "2.5 s"
    assert fields["other_ms"] == "7"  # an undeclared key is shown as it is, with no unit guessed


def test_a_typed_record_is_stored_as_its_dict(tmp_path: Path) -> None:
    with recording(tmp_path, "profile") as rec:
        rec.evidence = ProfileEvidence(distinct_ops=3, overhead=ProfilerOverhead(2.0, 1.0, 2.0))
        rec.summary = "three ops"
    record = RunDir(tmp_path).read("profile")
    names = [f.name for f in dataclasses.fields(ProfileEvidence)]
    stored = json.loads(RunDir(tmp_path).stage_path("profile").read_text())["evidence"]
    assert list(stored) == sorted(names) and stored["overhead"]["ratio"] == 2.0
    assert record.evidence == rec.done().evidence and record.evidence.overhead.ratio == 2.0
    assert rec.done().evidence.distinct_ops == 3


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
    assert [step.name for step in CHECK_STEPS] == list(CHECK_STAGES)
    # one type per fact set: the workbook's records are built on the check's, never re-declare them
    assert issubclass(EagerEvidence, EagerForward)
    assert issubclass(CompileEvidence, CompileCheck)
    assert issubclass(CompileEvidence, CompileTiming)
    assert issubclass(CpuBaselineEvidence, CpuRun) and issubclass(CpuCheck, CpuRun)
    buckets = {spec.name: spec for spec in evidence.specs(CompileCheck)}["buckets"]
    assert buckets.block is evidence.BucketPlan and issubclass(evidence.BucketPlan, evidence.Bucketing)


def _check_stage(stage: str, record: object, status: str = "pass") -> StageResult:
    return StageResult(stage, status, f"{stage} done", record)


def test_the_eager_record_is_built_from_the_check_records_it_ran() -> None:
    from neuronkit.stages.eager import run as eager

    forward = EagerForward(parity=evidence.Parity(top1_agreement=1.0), fallback_ops=["aten::isin"])
    generate = EagerGeneration(generate_identical=True, fallback_ops=["aten::argmax"])
    training = EagerTraining(ok=True, steps=2)
    record = eager.evidence({"eager": _check_stage("eager", forward), "generate": _check_stage("generate", generate),
                             "train": _check_stage("train", training)})
    assert record.parity.top1_agreement == 1.0 and record.parity.generate_identical is True
    assert record.fallback_ops == ["aten::argmax", "aten::isin"]
    assert record.fallback_ops_by_phase == {"forward": ["aten::isin"], "generate": ["aten::argmax"], "train": []}
    assert record.training is training and [s.stage for s in record.stages] == ["eager", "generate", "train"]
    skipped = eager.evidence({"eager": _check_stage("eager", forward),
                              "generate": _check_stage("generate", EagerGeneration(), "skipped")})
    assert skipped.generate is None and skipped.parity.generate_identical is None and skipped.training is None


def test_the_compile_record_is_the_compile_and_timing_records_with_one_bucket_plan(tmp_path: Path) -> None:
    from neuronkit.graph_compile.buckets import suggest_buckets
    from neuronkit.stages.compile import run as torch_compile

    plan = suggest_buckets([3, 4, 4, 9, 10, 30], max_buckets=2)
    compiled = CompileCheck(graphs=1, compile_time_s=1.5, buckets=plan)
    timing = CompileTiming(eager_step_ms=4.0, compiled_step_ms=2.0, speedup=2.0, runs=3)
    with recording(tmp_path, "compile") as rec:
        rec.evidence = torch_compile.evidence({"compile": _check_stage("compile", compiled),
                                               "timing": _check_stage("timing", timing)})
    assert rec.evidence.buckets is plan and rec.evidence.speedup == 2.0
    stored = RunDir(tmp_path).read("compile").evidence
    assert stored.graphs == 1 and stored.compile_time_s == 1.5 and stored.runs == 3
    assert stored.buckets.buckets == [10, 30] and stored.buckets.counts == {"10": 5, "30": 1}  # JSON's keys
    assert stored.buckets.alternatives[0].strategy == "pow2"


def test_a_stored_record_reads_back_as_its_type(tmp_path: Path) -> None:
    """What the report does with a record: its JSON dict back into the typed record, nested ones too."""
    original = EagerEvidence(
        parity=evidence.Parity(outputs=[evidence.ParityRow("logits", True, [1, 4], 1e-6, 1e-4)], top1_agreement=1.0),
        fallback_ops=["aten::isin"], training=EagerTraining(ok=True, cpu_losses=[2.0, 1.5]),
        neff_cache=NeffCache(hits=3), stages=[evidence.CheckStage("eager", "pass", "ok", 0.5)])
    with recording(tmp_path, "eager") as rec:
        rec.evidence = original
    stored = RunDir(tmp_path).read("eager").evidence
    assert stored == original
    partial = evidence.load(EagerEvidence, {"parity": {"outputs": [{"name": "loss"}]}, "unknown": 1})
    assert partial.parity.outputs[0].name == "loss" and partial.parity.outputs[0].max_abs_err is None
    assert partial.training is None and partial.neff_cache == NeffCache()


def _records_reachable() -> list[type]:
    """Every record type a stage's evidence, a check step's or script.json holds, nested ones too."""
    found = [stage.evidence for stage in WORKBOOK] + [step.evidence for step in CHECK_STEPS] + [evidence.ScriptEvidence]
    for cls in found:
        found += [t for spec in evidence.specs(cls) for t in (spec.block, spec.row) if t and t not in found]
    return found


def test_no_evidence_field_is_an_untyped_row_or_block() -> None:
    """Issue 21 item 3: rows and blocks are records; a dict field is only a plain mapping of names to
    numbers or text (counts per category, peak bytes per core), never a record kept as a dict."""
    untyped = [f"{cls.__name__}.{spec.name}: {spec.type_text}" for cls in _records_reachable()
               for spec in evidence.specs(cls)
               if "Any" in str(typing.get_type_hints(cls)[spec.name]) and spec.name != "shapes"]  # shapes: nested lists
    assert untyped == []


def test_the_last_dict_fields_read_back_typed(tmp_path: Path) -> None:
    params = {"model": "tiny-qwen3", "dtype": "float32", "seq_len": 16, "batch_size": 1, "layers": 0, "full_model": False}
    with recording(tmp_path, "environment") as rec:
        rec.evidence = EnvironmentEvidence(params=evidence.load(RunParams, params))
    assert RunDir(tmp_path).read("environment").evidence.params.seq_len == 16
    graph = {"graph_id": "7", "graph_name": "m_forward_0", "torch_neuronx_lower_us": 12, "fallback_ops": []}
    compiled = evidence.load(CompileEvidence, {"graph_metrics": [graph]})
    assert compiled.graph_metrics[0].torch_neuronx_lower_us == 12
    profile = evidence.load(ProfileEvidence, {"hardware": {"chip": "trn2", "logical_nc_config": 2}})
    assert profile.hardware.logical_nc_config == 2
    script = evidence.load(evidence.ScriptRun, {"blockers_hit": [{"line": 3, "rule": "nccl", "code": "x"}]})
    assert script.blockers_hit == [evidence.BlockerHit(3, "nccl", "x")]


def test_the_stage_comparison_reads_the_largest_error_from_the_typed_records(tmp_path: Path) -> None:
    from neuronkit.workbook import display

    run = RunDir(tmp_path)
    for stage, err in (("eager", 2e-6), ("compile", 5e-6)):
        rows = [evidence.ParityRow("logits", True, max_abs_err=err), evidence.ParityRow("ids", True, exact=True)]
        with recording(run, stage) as rec:
            rec.evidence = STAGE[stage].evidence(parity=evidence.Parity(outputs=rows))
    frame = display.comparison(tmp_path)
    assert frame.loc["max abs error vs CPU", "eager"] == "2.00e-06"
    assert frame.loc["max abs error vs CPU", "compile"] == "5.00e-06"
    assert frame.loc["max abs error vs CPU", "audit"] == "—"


def test_starting_a_run_keeps_another_models_run_and_clears_its_own(tmp_path: Path) -> None:
    """Notebook 00 with another `model` and the default `run_dir` is refused in one line, never emptying the
    earlier run; starting the same model again drops its records and its stale report."""
    from neuronkit.pipeline.config import Params, RunConfig
    from neuronkit.pipeline.flow import start_run

    first = Params("tiny-qwen3", str(tmp_path))
    start_run(first)
    first.run.write(StageResult("environment", "pass", "ok", {}))
    (tmp_path / "report.html").write_text("<p>old</p>")
    with pytest.raises(NeuronkitInputError, match=f"^{tmp_path} holds the run of tiny-qwen3; set run_dir to a new "
                                                  "directory for tiny-bert"):
        start_run(Params("tiny-bert", str(tmp_path)))
    assert first.run.read("environment") is not None and (tmp_path / "report.html").exists()
    start_run(Params("tiny-qwen3", str(tmp_path), RunConfig(seq_len=32)))
    assert first.run.read("environment") is None and not (tmp_path / "report.html").exists()
    assert first.run.read_params()["seq_len"] == 32


def _string_key_reads(tree: ast.AST) -> list[int]:
    """Lines that read stage evidence by string key: `x.evidence["k"]`, `x.evidence.get("k")`, or the same
    on a name bound to a record's evidence (`ev = result.evidence`), or on a key read of one."""
    bound = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
             for target in node.targets if isinstance(target, ast.Name) and _reads_evidence(node.value, set())}
    lines = []
    for node in ast.walk(tree):
        keyed = (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                 and isinstance(node.slice.value, str))
        got = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
               and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))
        base = node.value if keyed else node.func.value if got else None
        if base is not None and _reads_evidence(base, bound):
            lines.append(node.lineno)
    return sorted(set(lines))


def _reads_evidence(node: ast.AST, bound: set[str]) -> bool:
    """`node` is a stage record's evidence itself, a name bound to it, or a key read of one."""
    if isinstance(node, ast.Attribute) and node.attr == "evidence":
        return True
    if isinstance(node, ast.Name):
        return node.id in bound
    if isinstance(node, ast.Subscript):
        return _reads_evidence(node.value, bound)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return _reads_evidence(node.func.value, bound)
    if isinstance(node, ast.BoolOp):
        return any(_reads_evidence(value, bound) for value in node.values)
    return False


def test_no_string_key_reads_of_stage_evidence() -> None:
    """Notebooks, lesson, nbval, display and the report read typed records by attribute; the one JSON load
    is `StageResult.from_dict` (evidence.load). The checker itself finds the old style."""
    assert _string_key_reads(ast.parse('ev = result.evidence\nx = ev["device"]["kind"]\n'
                                       'y = (r.evidence.get("summary") or {}).get("blockers")')) == [2, 3]
    found = {str(path): lines for path, tree in _sources().items() if (lines := _string_key_reads(tree))}
    assert found == {}


class _FakeNotebooks:
    """`runner._execute_all`'s `execute`: records which notebooks were started (in the runner's thread) and
    which ran at the same time; each leaves its executed copy and, at its stage cell (after the runner's gate
    when it has one, `skipped` when a stage it requires did not pass, as `flow.begin` records it), writes its
    stage's record with the status `outcome` gives it (`error`: the notebook raises; `refused`: its stage
    records an `error`, `REFUSED`, as a check step that raised does, and the notebook ends). A notebook runs until another
    one runs beside it, or for `seconds` alone (however late a thread starts on a busy machine, a notebook
    started beside it is seen)."""

    def __init__(self, run: RunDir, outcome: dict[str, str], seconds: float = 0.0) -> None:
        import threading

        self.run, self.outcome, self.seconds = run, outcome, seconds
        self.started: list[str] = []
        self.recorded: list[str] = []  # stages in the order their notebooks wrote their records
        self.running: set[str] = set()
        self.overlaps: set[frozenset[str]] = set()
        self.lock = threading.Condition()

    def __call__(self, name: str, gate=None):
        from neuronkit.pipeline import flow
        from neuronkit.workbook import runner

        self.started.append(name[:2])

        def work() -> runner.NotebookRun:
            with self.lock:
                self.overlaps.update(frozenset({name[:2], other}) for other in self.running)
                self.running.add(name[:2])
                self.lock.notify_all()
                self.lock.wait_for(lambda: len(self.running) > 1, timeout=self.seconds)
            stage = next(s.name for s in WORKBOOK if s.ipynb == name)
            self.run.path.mkdir(parents=True, exist_ok=True)
            (self.run.path / name).write_text("{}")
            if gate is not None:
                gate.wait()
            status = self.outcome.get(stage, "pass")
            if reason := flow.blocked_by(self.run, stage):
                flow.skip(self.run, stage, reason)
            elif status == "refused":
                self.run.write(StageResult(stage, "error", REFUSED))
            elif status != "error":
                self.run.write(StageResult(stage, status, f"{stage}: logits differ" if stage == "eager" else "ok"))
            self.recorded.append(stage)
            error = "RuntimeError: boom\nTraceback ...\nRuntimeError: boom" if status == "error" else None
            with self.lock:
                self.running.discard(name[:2])
            return runner.NotebookRun(name, "error" if error else "ok", 0.1, self.run.path / name, error)
        return work


def _execute_all(run: RunDir, notebooks: _FakeNotebooks, side_by_side: bool = True) -> tuple[list, list[str]]:
    from concurrent.futures import ThreadPoolExecutor

    from neuronkit.workbook import runner

    lines: list[str] = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        return runner._execute_all(run, notebooks, lines.append, pool, side_by_side), lines


def test_the_runner_skips_a_stage_whose_requirement_failed_and_says_which(tmp_path: Path) -> None:
    """`neuronkit run`'s stage loop: a notebook whose required stage did not pass is not executed (its copy
    cells would run on what failed) and its stage is `skipped: eager failed`; the audit, which needs only
    the environment, still runs after eager's notebook itself failed. Compile's notebook, started beside the
    stages it requires (`starts_after`), is discarded: no executed copy, the same `skipped` record and line."""
    run = RunDir(tmp_path)
    notebooks = _FakeNotebooks(run, {"eager": "fail"})
    ran, lines = _execute_all(run, notebooks)
    assert sorted(notebooks.started) == ["00", "01", "02", "03", "04"]
    for stage in ("compile", "profile"):
        record = run.read(stage)
        assert record.status == "skipped" and record.summary == "eager failed (fail: eager: logits differ)"
    assert lines[2].endswith("fail         0.1s\n      eager: logits differ")  # why, under the line
    assert lines[4] == "[5/7] 04_compile.ipynb           skipped: eager failed (fail: eager: logits differ)"
    assert [nb.status for nb in ran] == ["pass", "pass", "fail", "pass", "skipped", "skipped"]
    assert ran[4].output is None and not (run.path / "04_compile.ipynb").exists()
    assert (run.path / "03_op_audit.ipynb").exists()

    notebooks.outcome["eager"] = "error"  # eager's notebook raised: its stage is `error`, the audit still runs
    run.stage_path("eager").unlink()
    notebooks.started.clear()
    _, lines = _execute_all(run, notebooks)
    assert lines[2].endswith("\n      RuntimeError: boom")  # the notebook's error, under its line
    assert [line.partition("skipped: ")[2] for line in lines[4:6]] == ["eager failed (error: the same error as eager)"] * 2
    eager = run.read("eager")
    assert eager.status == "error" and eager.error.splitlines()[-1] == "RuntimeError: boom"  # what the verdict quotes
    assert run.read("audit").status == "pass" and "03" in notebooks.started
    assert run.read("profile").summary == "eager failed (error: notebook 02_eager_on_neuron.ipynb failed: RuntimeError: boom)"


REFUSED = ("eager: ValueError: t must be divisible by 128: aten::_grouped_mm in model.layers.0.mlp.experts refused its "
           "inputs on the device [grouped_mm_alignment]. Pad every expert's token group to a multiple of 128, or load "
           "the model with experts_implementation=\"eager\"; generate: the same error as eager")


def test_an_error_the_stages_meet_is_spelled_out_once_in_the_progress_lines(tmp_path: Path) -> None:
    """An op the device refuses (a MoE's grouped matmul) makes eager's stage record an `error` with a paragraph of
    remedy, and the stages that need eager are skipped, their reasons quoting it: the progress lines give it once,
    under eager's line, and then say `the same error as eager` (as `check`'s table does); the records keep it whole."""
    run = RunDir(tmp_path)
    _, lines = _execute_all(run, _FakeNotebooks(run, {"eager": "refused"}))
    assert lines[2].startswith("[3/7] 02_eager_on_neuron.ipynb   error") and lines[2].endswith(f"\n      {REFUSED}")
    assert [line.partition("skipped: ")[2] for line in lines[4:6]] == ["eager failed (error: the same error as eager)"] * 2
    assert "\n".join(lines).count("Pad every expert's token group") == 1
    assert run.read("compile").summary == f"eager failed (error: {REFUSED})"


def test_the_runner_runs_stages_that_do_not_require_each_other_side_by_side(tmp_path: Path) -> None:
    """Each notebook starts once the stages it requires have ended: the audit beside the CPU baseline and
    eager, profiling beside compile, when two copies of the model fit the memory budget (`side_by_side`);
    otherwise one at a time in stage order. Side by side, compile's notebook (`starts_after = []`: its cells
    compile the model, the longest step) starts beside the environment, and its stage cell waits for eager's
    record. The progress lines keep the stages' order whichever ends first."""
    notebooks = _FakeNotebooks(RunDir(tmp_path / "both"), {}, seconds=1.0)
    ran, lines = _execute_all(notebooks.run, notebooks, side_by_side=True)
    assert notebooks.started == ["00", "04", "01", "02", "03", "05"]  # 03 needs only 00; 05 needs 02
    assert {frozenset({"00", "04"}), frozenset({"01", "04"}), frozenset({"02", "04"})} <= notebooks.overlaps
    assert frozenset({"01", "03"}) not in notebooks.overlaps  # the second core is compile's: one early stage
    assert [line.split()[0] for line in lines] == [f"[{n}/7]" for n in range(1, 7)]
    assert [nb.status for nb in ran] == ["pass"] * 6
    assert notebooks.recorded.index("compile") > notebooks.recorded.index("eager")

    notebooks = _FakeNotebooks(RunDir(tmp_path / "one"), {}, seconds=0.05)
    _execute_all(notebooks.run, notebooks, side_by_side=False)
    assert notebooks.started == ["00", "01", "02", "03", "04", "05"] and not notebooks.overlaps


def test_starts_after_names_only_stages_the_stage_requires() -> None:
    """Compile's notebook needs no record before its stage cell; every other stage starts after all it requires."""
    from neuronkit.pipeline import stage as pipeline

    assert {s.name for s in WORKBOOK if s.starts_after != s.requires} == {"compile"}
    assert pipeline.STAGE["compile"].starts_after == ()
    with pytest.raises(ValueError, match="starts_after"):
        pipeline._starts_after({"name": "x", "requires": ["eager"], "starts_after": ["audit"]})


def test_two_stages_hold_the_model_side_by_side_only_when_two_copies_fit_the_budget(monkeypatch) -> None:
    """`preflight`'s answer: the bundled model fits twice over; with a budget below two copies of it, or on a
    layer slice (which is as large as the budget allows), the stages take turns."""
    import torch

    from neuronkit import slicing
    from neuronkit.models import load_config
    from neuronkit.pipeline.config import Params, RunConfig
    from neuronkit.workbook import runner

    run = Params("tiny-qwen3", "unused")
    assert runner.preflight(run).side_by_side is True
    need = slicing.need_bytes(load_config("tiny-qwen3"), torch.float32, sliced=False)
    assert runner.preflight(Params("tiny-qwen3", "unused", RunConfig(layers=1))).side_by_side is False
    monkeypatch.setattr(slicing, "memory_budget", lambda available=None: 2 * need - 1)
    assert runner.preflight(run).side_by_side is False
