"""The report model: what the migration report says, built only from a run directory's records.

The HTML and report.json are two views of this one model, so they cannot disagree; the verdict is derived
from stage statuses and audit findings and never claims a stage that has no record.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from neuronkit.errors import NeuronkitInputError
from neuronkit.evidence import AuditEvidence, AuditFinding, AuditOp
from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.pipeline.stage import STAGE, WORKBOOK, Stage
from neuronkit.policy import CPU_FALLBACK, SEVERITIES, base_name, load_policy
from neuronkit.reporting.evidence import EvidenceItem, evidence_items
from neuronkit.run_command import RUN_OPTIONS, run_command

REPORT_SCHEMA_VERSION = 5  # 2: device, key_numbers; a finding's calls may be null. 3: a finding's phases,
# each key number's `number` and `unit`, next_steps, ran_on. 4: a key number's `clock`; forward time and
# compiled speed-up key numbers. 5: `compat`, the audit's public PyTorch APIs in AWS's compatibility vocabulary
MAX_OP_ROWS = 2000  # rows of the op table in the HTML; the audit record keeps every op

VERDICTS: dict[str, str] = {
    "blocked": "Blocked",
    "incomplete": "Incomplete",
    "ready_with_cpu_fallbacks": "Ready with CPU fallbacks",
    "ready_with_caveats": "Ready, with caveats",
    "ready": "Ready",
}
_NAMES_SHOWN = 8
TOP_REASONS = 3  # reasons shown beside the verdict; report.json and the page's details keep them all
_REASON_WORDS = 18
# A parenthesised aside after a space, which may hold calls like `tie_weights()`; `op(s)` is no aside.
_ASIDE = re.compile(r"\s+\((?:[^()]|\w\([^()]*\))*\)")
# Where an op was seen falling back to the CPU. GENERATE alone means only Hugging Face's decoding loop
# (sampling, stopping criteria) calls it: the model's forward, backward and optimizer step never do.
GENERATE = "generate"
PHASES: dict[str, str] = {
    "forward": "the model's forward",
    "train": "the training step",
    GENERATE: "generate()'s decoding loop",
    "compile": "a compiled graph",
    "profile": "the profiled forward",
    "audit": "the op audit's trace",
}
MAX_NEXT_STEPS = 3


@dataclass
class StageCard:
    """One stage as the report shows it; `status` is `missing` when the stage left no record."""

    stage: str
    title: str
    status: str
    summary: str
    error: str | None = None
    duration_s: float | None = field(default=None, metadata={"unit": "s"})
    finished_at: str | None = None
    evidence: list[EvidenceItem] = field(default_factory=list)


@dataclass
class Finding:
    """An audit finding with the severity the audit recorded; `calls` is None for an op seen falling back
    to CPU outside the audit (eager run, compiled graphs or profiler), which counts no calls. `phases`
    (keys of PHASES) say where a CPU fallback was seen; ["generate"] alone: only the decoding loop."""

    category: str
    severity: str
    op: str
    calls: int | None
    message: str
    remedy: str
    module_paths: list[str]
    phases: list[str] = field(default_factory=list)

    @property
    def seen_in(self) -> str:
        """Where the fallback was seen, in words."""
        return _where(self.phases)

    @property
    def generate_only(self) -> bool:
        """A CPU fallback only `generate()`'s decoding loop makes, never the model's own passes."""
        return self.category == CPU_FALLBACK and self.phases == [GENERATE]


@dataclass
class KeyNumber:
    """One tile at the top of the report: a number that matters for the migration, and what it counts;
    `value` is its text, `number` and `unit` the figure itself (report.json); `clock` says what a time
    is: `host` (measured on the simulated device's host CPU), `trainium` (measured on Trainium) or
    `estimate` (modelled; the note names the model); empty for a number that is not a time."""

    label: str
    value: str
    note: str
    number: float | int | None = None
    unit: str = ""
    clock: str = ""


@dataclass
class OpRow:
    """One row of the op coverage table, lists already joined to text."""

    op: str
    calls: int
    classification: str
    category: str
    severity: str
    dtypes: str
    shapes: str
    module_paths: str
    nki_est_us: float | None = None  # an NKI op: its ESTIMATED engine time per call on trn2 (neuronkit/nki/cost.py)


@dataclass
class ReportModel:
    """Everything the report renders; `records` are the raw stage records, embedded once in the HTML."""

    model_name: str
    run_dir: str
    device: str  # simulated, real, none or unknown: where the `neuron` device of the run came from
    verdict: str
    reasons: list[str]
    missing_stages: list[str]
    stages: list[StageCard]
    blockers: list[Finding]
    warnings: list[Finding]
    audit_summary: dict[str, Any] | None
    ops: list[OpRow]
    ops_total: int
    charts: dict[str, Any]
    reproduce: dict[str, Any]
    records: dict[str, dict[str, Any] | None]
    key_numbers: list[KeyNumber] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    ran_on: str = ""  # what the verdict rests on: the full model, or which stages ran a layer slice

    @property
    def verdict_label(self) -> str:
        return VERDICTS[self.verdict]

    @property
    def top_reasons(self) -> list[str]:
        """At most TOP_REASONS reasons, each cut to its gist: what the first screen shows."""
        return [_gist(reason) for reason in self.reasons[:TOP_REASONS]]

    @property
    def finished_at(self) -> str | None:
        """When the last recorded stage finished."""
        times = [card.finished_at for card in self.stages if card.finished_at]
        return max(times) if times else None

    def to_json(self) -> dict[str, Any]:
        """The machine-readable report (report.json): stable keys, no rendering detail."""
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "model": self.model_name,
            "run_dir": self.run_dir,
            "device": self.device,
            "verdict": self.verdict,
            "verdict_label": self.verdict_label,
            "reasons": self.reasons,
            "ran_on": self.ran_on,
            "missing_stages": self.missing_stages,
            "stages": {card.stage: {"title": card.title, "status": card.status, "summary": card.summary,
                                    "error": card.error, "duration_s": card.duration_s,
                                    "finished_at": card.finished_at} for card in self.stages},
            "blockers": [asdict(f) for f in self.blockers],
            "warnings": [asdict(f) for f in self.warnings],
            "audit": self.audit_summary,
            "key_numbers": [asdict(k) for k in self.key_numbers],
            "next_steps": self.next_steps,
            "reproduce": self.reproduce,
        }


def build_model(run: RunDir) -> ReportModel:
    """Read a run directory's records and params and derive the report from them alone."""
    if not run.path.is_dir():
        raise NeuronkitInputError(f"run directory not found: {run.path}")
    records, params = _read(run)
    if not any(records.values()):
        raise NeuronkitInputError(f"no stage records under {run.stages_dir}; is {run.path} a run directory?")
    audit = _record(records, "audit") or AuditEvidence()
    severity = _recorded_severities(audit)
    phases = _fallback_phases(records)
    findings = [_finding(f, phases) for f in audit.findings]
    findings += _unaudited_fallbacks(findings, audit, phases)
    blockers = [f for f in findings if f.severity == "blocker"]
    warnings = sorted((f for f in findings if f.severity != "blocker"),
                      key=lambda f: (SEVERITIES.index(f.severity), f.category, -(f.calls or 0), f.op))
    ops = _op_rows(audit.ops, severity)
    verdict, reasons = _verdict(RunRecords(records, blockers, warnings))
    reproduce = _reproduce(records, params, run)
    return ReportModel(
        model_name=_model_name(records, params, run),
        run_dir=str(run.path),
        device=_device_kind(records),
        verdict=verdict,
        reasons=reasons,
        missing_stages=[stage for stage, record in records.items() if record is None],
        stages=[_card(stage, record, _device_kind(records) != "real") for stage, record in records.items()],
        blockers=blockers,
        warnings=warnings,
        audit_summary=asdict(audit.summary) if _record(records, "audit") else None,
        ops=ops[:MAX_OP_ROWS],
        ops_total=len(ops),
        charts=_chart_data(records, audit, ops, severity),
        reproduce=reproduce,
        records={stage: record.to_dict() if record else None for stage, record in records.items()},
        key_numbers=_key_numbers(RunRecords(records, blockers, warnings)),
        next_steps=_next_steps(records, blockers, warnings, reproduce["command"]),
        ran_on=_ran_on(records),
    )


def _ran_on(records: dict[str, StageResult[Any] | None]) -> str:
    """One sentence: what the stages that run the model ran on, and what covers the full model."""
    slices = {stage.name: piece for stage in WORKBOOK
              if stage.runs_model and (piece := getattr(_record(records, stage.name), "model_slice", None)) is not None}
    sliced = {stage: piece for stage, piece in slices.items() if not piece.full_model}
    if not sliced:
        return "Every stage ran on the full model." if slices else ""
    piece = next(iter(sliced.values()))
    titles = ", ".join(STAGE[stage].title for stage in sliced)
    return (f"{titles} ran on {piece.describe()} — {piece.reason}. The op audit, the memory figures and the "
            "parallel plan cover the full model.")


def _device_kind(records: dict[str, StageResult[Any] | None]) -> str:
    return getattr(_device(records), "kind", "") or "unknown"


def _recorded_severities(audit: AuditEvidence) -> dict[str, str]:
    """Category → severity as the audit recorded it (its policy's table, and each finding's own)."""
    severity = {str(k): _known(str(v)) for k, v in (audit.severities or {}).items()}
    severity.update({f.category: _known(f.severity) for f in audit.findings})
    return severity


def _fallback_phases(records: dict[str, StageResult[Any] | None]) -> dict[str, tuple[str, list[str]]]:
    """Base op name → (the name first seen, the phases it fell back to the CPU in), from what each stage's
    report says its run saw fall back (`fallbacks`: the eager run by phase, the compiled graphs, the
    profiler), in stage order."""
    seen: dict[str, tuple[str, list[str]]] = {}
    for stage in WORKBOOK:
        hook = _hook(stage, "fallbacks")
        evidence = _record(records, stage.name)
        for op, phase in (hook(evidence) if hook is not None and evidence is not None else []):
            phases = seen.setdefault(base_name(op), (op, []))[1]
            if phase not in phases:
                phases.append(phase)
    return seen


def _hook(stage: Stage, name: str) -> Any:
    """Function `name` of the stage's report module (`neuronkit/stages/<name>/report.py`), None without one."""
    module = stage.part("report")
    return getattr(module, name, None) if module is not None else None


def _where(phases: list[str]) -> str:
    return ", ".join(PHASES.get(phase, phase) for phase in phases)


def _unaudited_fallbacks(findings: list[Finding], audit: AuditEvidence,
                         phases: dict[str, tuple[str, list[str]]]) -> list[Finding]:
    """Ops the eager run, the compiled graphs or the profiler saw falling back to CPU that the op audit
    did not record (e.g. only `generate()` calls them): findings too, or the report would name them
    nowhere but a reason. Severity and remedy are those the audit recorded for CPU fallbacks."""
    audited = {base_name(f.op) for f in findings}
    severity = _recorded_severities(audit).get(CPU_FALLBACK, "warn")
    remedy = str((audit.remedies or {}).get(CPU_FALLBACK) or load_policy().remedies.get(CPU_FALLBACK, ""))
    unaudited = []
    for name, (op, where) in phases.items():
        if name in audited:
            continue
        if where == [GENERATE]:
            message = ("fell back to CPU only in generate()'s decoding loop (Hugging Face's sampling and stopping "
                       "code), never in the model's forward or training step: a host round trip per generated "
                       "token")
        else:
            message = f"fell back to CPU in {_where(where)}; the op audit did not record it"
        unaudited.append(Finding(CPU_FALLBACK, severity, op, None, message, remedy, [], list(where)))
    return unaudited


@dataclass(frozen=True)
class RunRecords:
    """A run's records as each stage's report numbers read them (`neuronkit/stages/<name>/report.py`):
    every stage's typed evidence, whether it left a record, the clock its times are on, and the findings."""

    records: dict[str, StageResult[Any] | None]
    blockers: list[Finding]
    warnings: list[Finding]

    def evidence(self, stage: str) -> Any:
        """The stage's typed evidence, None when it has no record or its record holds none."""
        return _record(self.records, stage)

    def has(self, stage: str) -> bool:
        """Whether the stage left a record (of any status)."""
        return self.records.get(stage) is not None

    @property
    def clock(self) -> str:
        """What the run's times are: `trainium` on a real device, else `host` (the simulator's CPU)."""
        return "trainium" if _device_kind(self.records) == "real" else "host"


def _key_numbers(run: RunRecords) -> list[KeyNumber]:
    """The tiles under the verdict: each stage's report numbers (`key_numbers`), the headline stage's first
    (op support), then the CPU fallbacks the stages saw, then the others' in stage order. A number whose
    record is absent is left out rather than shown as zero."""
    def tiles(stages: list[Stage]) -> list[KeyNumber]:
        return [tile for stage in stages if (hook := _hook(stage, "key_numbers")) is not None for tile in hook(run)]

    numbers = tiles([s for s in WORKBOOK if s.headline])
    seeing = [s for s in WORKBOOK if s.headline or _hook(s, "fallbacks") is not None]
    if any(run.has(stage.name) for stage in seeing):
        model_path, generate_only = _fallback_split(run.warnings)
        note = "in the model's forward or training: a host round trip per call"
        if generate_only:
            note += f"; {len(generate_only)} more only in generate()'s decoding loop"
        numbers.append(KeyNumber("CPU-fallback ops", str(len(model_path)), note, len(model_path), "ops"))
    return numbers + tiles([s for s in WORKBOOK if not s.headline])


def _fallback_split(warnings: list[Finding]) -> tuple[list[str], list[str]]:
    """CPU-fallback ops in the model's path, and those only `generate()`'s decoding loop makes."""
    fallbacks = [f for f in warnings if f.category == CPU_FALLBACK]
    return [f.op for f in fallbacks if not f.generate_only], [f.op for f in fallbacks if f.generate_only]


def _next_steps(records: dict[str, StageResult[Any] | None], blockers: list[Finding], warnings: list[Finding],
                command: str) -> list[str]:
    """At most MAX_NEXT_STEPS concrete steps, the most pressing first: each blocker category's remedy, the
    stages to re-run, the model-path fallbacks, other findings to plan for, the decoding loop's fallbacks;
    then, when there is room, the run to repeat on a Trainium instance."""
    steps: list[str] = []
    for category, group in _by_category(blockers).items():
        steps.append(f"Change the {category} blocker ({_names([f.op for f in group])}): {group[0].remedy}")
    unrun = [STAGE[stage].title for stage, record in records.items()  # those skipped for a cause run with it
             if record is None or record.status == "error" or (record.status == "skipped"
                                                                and _skipped_for(records, stage) is None)]
    if unrun:
        steps.append(f"Re-run the stage(s) without a verdict ({', '.join(unrun)}): {command}")
    model_path, generate_only = _fallback_split(warnings)
    if model_path:
        remedy = next(f.remedy for f in warnings if f.category == CPU_FALLBACK and not f.generate_only)
        steps.append(f"Decide on the {len(model_path)} CPU-fallback op(s) in the model's path "
                     f"({_names(model_path)}): {remedy}")
    for category, group in _by_category([f for f in warnings if f.severity == "warn"
                                         and f.category != CPU_FALLBACK]).items():
        steps.append(f"Plan for the {category} finding(s) ({_names([f.op for f in group])}): {group[0].remedy}")
    if generate_only:
        steps.append(f"If you serve with generate(), expect a host round trip per generated token for "
                     f"{_names(generate_only)} (Hugging Face's decoding loop, not the model): measure generate() "
                     "latency on a Trainium instance before you rely on it.")
    if not blockers and not unrun:
        steps.append("Repeat this run on a Trainium instance with the real torch_neuronx installed (neuronkit steps "
                     f"aside for it): {command}")
    return steps[:MAX_NEXT_STEPS]


def _by_category(findings: list[Finding]) -> dict[str, list[Finding]]:
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f.category, []).append(f)
    return groups


def _gist(reason: str) -> str:
    """A reason without its parenthesised asides, cut to _REASON_WORDS words."""
    text = _ASIDE.sub("", reason)
    words = text.split()
    return " ".join(words[:_REASON_WORDS]) + (" …" if len(words) > _REASON_WORDS else "")


def _read(run: RunDir) -> tuple[dict[str, StageResult[Any] | None], dict[str, Any]]:
    """The stage records and params.json; a corrupt file is bad input, not a crash."""
    try:
        return run.results(), run.read_params()
    except (ValueError, TypeError) as exc:  # invalid JSON, or a record of the wrong shape
        raise NeuronkitInputError(f"unreadable record in {run.path}: {exc}") from None


def _record(records: dict[str, StageResult[Any] | None], stage: str) -> Any:
    """A stage's typed evidence (its `Stage.evidence`), None when the stage has no record or its record
    holds no evidence (the empty record: skipped, or a crash before the stage recorded anything)."""
    record = records.get(stage)
    return record.recorded if record is not None else None


def _device(records: dict[str, StageResult[Any] | None]) -> Any:
    """The environment record's device (`neuronkit.detect()`'s `DeviceInfo`), None when there is none."""
    environment = _record(records, "environment")
    return environment.device if environment is not None else None


def _parity_rows(records: dict[str, StageResult[Any] | None], stage: str) -> list[Any]:
    """The eager or compile record's parity rows (ParityRow), none when the stage has no record."""
    record = _record(records, stage)
    outputs = record.parity.outputs if record is not None and hasattr(record.parity, "outputs") else []
    return [row for row in outputs if hasattr(row, "max_abs_err")]


def _known(severity: str) -> str:
    return severity if severity in SEVERITIES else "warn"


def _finding(found: AuditFinding, phases: dict[str, tuple[str, list[str]]]) -> Finding:
    """A finding as the audit recorded it, its severity included; a CPU fallback's phases are the audit's
    trace and wherever the runs saw it fall back."""
    category, op = found.category or "unknown", found.op
    seen = ["audit"] + phases.get(base_name(op), (op, []))[1] if category == CPU_FALLBACK else []
    return Finding(category=category, severity=_known(found.severity), op=op, calls=int(found.calls or 0),
                   message=found.message, remedy=found.remedy, module_paths=[str(p) for p in found.module_paths],
                   phases=seen)


def _op_rows(ops: list[AuditOp], severity: dict[str, str]) -> list[OpRow]:
    rows = [OpRow(
        op=op.op,
        calls=int(op.calls or 0),
        classification=op.classification,
        category=op.category,
        severity=severity.get(op.category, "ok"),
        dtypes=_join(op.dtypes),
        shapes=_join(op.shapes),
        module_paths=_join(op.module_paths),
        nki_est_us=op.nki_est_us,
    ) for op in ops]
    return sorted(rows, key=lambda r: (SEVERITIES.index(r.severity), -r.calls, r.op))


def _join(values: Any, limit: int = 4) -> str:
    if not isinstance(values, list):
        return "" if values is None else str(values)
    shown = [v if isinstance(v, str) else json.dumps(v) for v in values[:limit]]
    return ", ".join(shown) + (f" (+{len(values) - limit} more)" if len(values) > limit else "")


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown + (f" and {len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else "")


def _error_line(text: str | None) -> str:
    """The last non-blank line: a traceback's exception, or a skip reason."""
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _verdict(run: RunRecords) -> tuple[str, list[str]]:
    """The verdict and every reason behind it, the most severe class first.

    blocked: blocker findings, a failed audit, or eager parity failed/errored.
    incomplete: a stage has no usable record (missing, skipped, errored), or the environment or CPU
    baseline failed. ready_with_cpu_fallbacks: it runs, with ops falling back to CPU (and maybe other
    warnings). ready_with_caveats: it runs natively, with warnings to plan for (e.g. untied weights,
    dynamic shapes). ready: every stage passed with nothing to plan for. Stages skipped because a stage they
    require failed are one reason, beside that stage's: a consequence, not a cause of their own. A stage's
    report may add caveats of its own (`caveats`: the CPU baseline's chance-level loss).
    """
    records, blockers, warnings = run.records, run.blockers, run.warnings
    blocked = [f"Op audit: {len(group)} blocker op(s) in category {category}: {_names([f.op for f in group])}."
               for category, group in _by_category(blockers).items()]
    incomplete: list[str] = []
    caveats: list[str] = []
    consequences: dict[str, list[str]] = {}  # a failed stage → the stages skipped because of it
    for stage, record in records.items():
        title = STAGE[stage].title
        cause = _skipped_for(records, stage)
        if cause is not None:  # not a verdict of its own: its cause's reason says why
            consequences.setdefault(cause, []).append(title)
        elif record is None:
            incomplete.append(f"{title}: no record (stage not run).")
        elif record.status in STAGE[stage].blocking:  # the model cannot migrate as it is
            if not (stage == "audit" and blockers):  # the blocker findings already say why
                blocked.append(f"{title}: {record.status} — {record.summary or _error_line(record.error)}")
        elif record.status == "error":
            incomplete.append(f"{title}: error (the stage crashed, so it has no verdict) — "
                              f"{_error_line(record.error) or record.summary}")
        elif record.status == "skipped" or (record.status == "fail" and STAGE[stage].foundation):
            incomplete.append(f"{title}: {record.status} — {_error_line(record.error) or record.summary}")
        elif record.status in ("warn", "fail"):
            caveats.append(f"{title}: {record.status} — {record.summary}")
    for cause, titles in consequences.items():
        record = records[cause]
        outcome = "has no record" if record is None else "was skipped" if record.status == "skipped" else "failed"
        beside = blocked if record is not None and record.status in STAGE[cause].blocking else incomplete
        beside.append(f"{', '.join(titles)}: skipped: {STAGE[cause].title} {outcome}, and "
                      f"{'they need' if len(titles) > 1 else 'it needs'} it.")
    fallback_ops, generate_only = _fallback_split(warnings)
    if fallback_ops:
        caveats.insert(0, f"{len(fallback_ops)} op(s) fall back to CPU in the model's path (a host round trip per "
                          f"call): {_names(fallback_ops)}.")
    for category in dict.fromkeys(f.category for f in warnings if f.severity == "warn"):
        if category != CPU_FALLBACK:
            ops = [f.op for f in warnings if f.category == category]
            caveats.append(f"Op audit: {category} findings to plan for: {_names(ops)}.")
    for stage in WORKBOOK:
        hook = _hook(stage, "caveats")
        caveats.extend(hook(run) if hook is not None else [])
    if generate_only:
        caveats.append(f"generate() only: {len(generate_only)} op(s) of Hugging Face's decoding loop fall back to "
                       f"CPU, a host round trip per generated token: {_names(generate_only)}. The model's forward "
                       "and training step run without them.")
    for verdict, reasons in (("blocked", blocked), ("incomplete", incomplete),
                             ("ready_with_cpu_fallbacks", fallback_ops), ("ready_with_caveats", caveats)):
        if reasons:
            return verdict, blocked + incomplete + caveats
    return "ready", [f"All {len(records)} stages passed; the op audit has no blocker or warning findings."]


def _skipped_for(records: dict[str, StageResult[Any] | None], stage: str) -> str | None:
    """The stage whose missing or failed record `stage` was skipped for: its first required stage
    (neuronkit/data/stages.toml, in migration order) without a pass/warn record; None when `stage` was not
    skipped, or was skipped with every stage it requires passed (then the skip is its own reason)."""
    record = records.get(stage)
    if record is None or record.status != "skipped":
        return None
    return next((needed for needed in STAGE[stage].requires
                 if (found := records.get(needed)) is None or not found.ok), None)


def _card(stage: str, record: StageResult[Any] | None, host: bool) -> StageCard:
    if record is None:
        return StageCard(stage, STAGE[stage].title, "missing", "No record: this stage did not run.")
    return StageCard(stage, STAGE[stage].title, record.status, record.summary, record.error, record.duration_s,
                     record.finished_at, evidence_items(stage, record.evidence, host))


def _model_name(records: dict[str, StageResult[Any] | None], params: dict[str, Any], run: RunDir) -> str:
    environment = _record(records, "environment")
    name = getattr(environment.model, "name", None) if environment is not None else None
    return str(name or params.get("model") or run.path.name)


def _chart_data(records: dict[str, StageResult[Any] | None], audit: AuditEvidence, ops: list[OpRow],
                severity: dict[str, str]) -> dict[str, Any]:
    """The numbers behind each chart; a chart whose numbers are absent is left out."""
    charts: dict[str, Any] = {}
    by_category = audit.summary.by_category or Counter(row.category for row in ops)
    if by_category:
        charts["op_categories"] = [{"category": c, "ops": n, "severity": severity.get(c, "ok")}
                                   for c, n in by_category.items()]
    profile = _record(records, "profile")
    top_ops = [row for row in (profile.top_ops if profile is not None else [])
               if isinstance(getattr(row, "device_time_us", None), (int, float))]
    if top_ops:
        charts["top_ops"] = [{"name": str(r.name), "device_time_us": r.device_time_us,
                              "classification": str(r.classification or "")} for r in top_ops]
    compiled = _record(records, "compile")
    if compiled is not None and all(isinstance(v, (int, float)) for v in (compiled.eager_step_ms,
                                                                          compiled.compiled_step_ms)):
        charts["step_time"] = {"eager_step_ms": compiled.eager_step_ms, "compiled_step_ms": compiled.compiled_step_ms}
    parity = [{"run": run, **asdict(out)} for run, stage in (("eager", "eager"), ("compiled", "compile"))
              for out in _parity_rows(records, stage) if isinstance(out.max_abs_err, (int, float))]
    if parity:
        charts["parity"] = parity
    return charts


def _reproduce(records: dict[str, StageResult[Any] | None], params: dict[str, Any], run: RunDir) -> dict[str, Any]:
    """Versions, parameters and the `neuronkit run` command that repeats this run."""
    versions = getattr(_device(records), "versions", None)
    model = params.get("model") or _model_name(records, params, run)
    given = run.read_side_record(RUN_OPTIONS)  # `neuronkit run`'s options beyond params.json, when it made the run
    command = run_command(str(model), str(run.path), {**params, **(given if isinstance(given, dict) else {})})
    return {"versions": versions or {}, "params": params, "command": command}
