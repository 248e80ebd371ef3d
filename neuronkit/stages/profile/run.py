"""What notebook 05 calls: the profiling stage, and what the notebook says next."""

from __future__ import annotations

import functools
from dataclasses import fields
from typing import Any

from neuronkit import slicing
from neuronkit.evidence import rows
from neuronkit.pipeline.config import Params
from neuronkit.pipeline.execute import Recording, run_stage
from neuronkit.pipeline.record import RunDir, StageResult
from neuronkit.pipeline.session import load, neuron_device, ran_on, run_slice
from neuronkit.stages.profile import ProfileOptions
from neuronkit.stages.profile.evidence import (ProfileEvidence, ProfiledFallback, ProfilerOverhead, RooflineHardware,
                                               TopOp)
from neuronkit.workbook.lesson import after, op_list

TOP_COLUMNS = [f.name for f in fields(TopOp)]


def run(params: Params, profiled: Any = None, **options: Any) -> StageResult[ProfileEvidence]:
    """Profile `steps` forward passes on `device` after `warmup` unprofiled ones; keep the `top` ops by
    device time, the trace and Parquet paths, the profiler's overhead and the CPU fallbacks it saw
    (`ProfileOptions`).

    `profiled`: the `NeuronProfiler` whose `export_trace` closed the notebook's own profile of `steps`
    forward passes of the run's model and inputs (labels left out) on `device`, after its warm-up. The
    stage then keeps that profile instead of taking another, and times `steps` plain passes for the
    overhead (`neuronkit.profiling.api.from_export`).

    `warn` when ops fell back to the CPU during the profiled steps."""
    return run_stage("profile", params, options, functools.partial(_profile, profiled=profiled))


def _profile(params: Params, rec: Recording[ProfileEvidence], *, profiled: Any) -> None:
    from neuronkit.graph_compile.compare import move_inputs
    from neuronkit.profiling import profile
    from neuronkit.profiling.api import from_export

    opts = params.config.of(ProfileOptions)
    target = neuron_device(opts.device)
    session = load(params)
    piece = run_slice(params)
    steps = slicing.repeats(piece, "profile_steps", opts.steps)
    warmup = slicing.repeats(piece, "profile_warmup", opts.warmup)
    inputs = move_inputs({k: v for k, v in session.inputs.items() if k != "labels"}, target)  # inference
    export = getattr(profiled, "last", None)
    reused = False
    try:
        if export is not None and not export.events.empty:
            reused = True
            frame = from_export(session.model.to(target), inputs, export, steps)
        else:
            frame = profile(session.model.to(target), inputs, steps=steps, warmup=warmup,
                            output_dir=params.run.artifact_dir("profile"))
    finally:
        session.model.to("cpu")  # the kernel's shared model stays on the CPU
    info = frame.attrs
    rec.evidence = ProfileEvidence(
        top_ops=rows(TopOp, _records(frame.head(opts.top)[TOP_COLUMNS])),
        distinct_ops=len(frame),
        fallbacks=rows(ProfiledFallback, info["fallbacks"]),
        overhead=ProfilerOverhead(**info["overhead"]),
        trace_path=info["trace_path"],
        parquet_path=info["parquet_path"],
        summary_path=info["summary_path"],
        hardware=RooflineHardware(**info["hardware"]),
        est_trn2_step_us=info["est_trn2_step_us"],
        model_slice=session.model_slice,
        profiled_by_caller=reused,
    )
    hottest = frame.iloc[0]["name"] if len(frame) else "none"
    rec.summary = (f"{len(frame)} distinct ops over {steps} profiled steps; hottest {hottest}; "
                   f"{len(info['fallbacks'])} fell back to CPU; {overhead_text(info['overhead'])}"
                   f"{ran_on(session.model_slice)}")
    if info["fallbacks"]:
        rec.status = "warn"


def overhead_text(overhead: dict[str, Any]) -> str:
    """The profiler's overhead with what it means for the profile's times."""
    text = f"profiler overhead {overhead['ratio']:.2f}× (host timing)"
    if overhead["reading"] == "high":
        text += ": high, so each op's time is inflated; compare ops by their share of the step"
    return text


def _records(frame: Any) -> list[dict[str, Any]]:
    """Rows as dicts, a missing number (NaN: e.g. no NKI estimate for an ATen op) as None."""
    records: list[dict[str, Any]] = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return records


def next_step(result: StageResult[ProfileEvidence], run: RunDir | None) -> str:
    """The CPU fallbacks first, then the hottest op, then the report."""
    record = result.evidence
    assert record is not None
    top = record.top_ops[0].name if record.top_ops else None
    names = [row.name for row in record.fallbacks]
    text = (f"Remove the CPU fallbacks first ({op_list(names)}): each copies its tensors to the host and back "
            "on every call. " if names else "")
    if top:
        text += f"The hottest op is `{top}`; on Trainium, confirm it with a real profile before optimising. "
    return text + f"Open {after(result)} for the verdict across all stages."
