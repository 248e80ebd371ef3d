"""docs/run-directory.md, generated from the stages' record types: the run directory's layout, each stage's
and each check step's record with every field's label and unit (test_stage_model.py keeps it current).

    .venv/bin/python tests/pipeline/run_directory_doc.py docs/run-directory.md
"""

from __future__ import annotations

import sys
from typing import Any

from neuronkit.evidence import UNITS, ScriptEvidence, specs
from neuronkit.pipeline.record import SCHEMA_VERSION
from neuronkit.pipeline.stage import CHECK_STEPS, WORKBOOK

_HEADER = """# The run directory: what each stage writes

<!-- Generated from the stages' record types by `python tests/pipeline/run_directory_doc.py docs/run-directory.md`;
a test keeps it current. Edit the types, not this file. -->

A workbook run (`neuronkit run MODEL --out DIR`, or the notebooks by hand) fills one directory:

```
DIR/
  params.json                 the parameters the run was started with (model, dtype, ...)
{records}
  artifacts/<stage>/...       bulky outputs: the CPU reference, executed notebooks, traces, Parquet, audit.json
  script.json                 your training script (`neuronkit run MODEL --script train.py`)
  artifacts/model/slice.json  what the stages that run the model run (full model or layer slice), decided once per run
  artifacts/model/inputs.safetensors  the example inputs every stage runs on, made once per run
  report.html, report.json    the migration report (neuronkit report DIR)
```

Every record has `stage`, `status` (`pass` | `warn` | `fail` | `error` | `skipped`), `summary` (one
sentence), `evidence` (below), `error` (traceback text when status is `error`, the reason when
`skipped`), `duration_s`, `finished_at`, `schema_version` ({version}). `fail` is a verdict on the model;
`error` means the stage's code raised, so there is no verdict. A stage that fails still writes its
record; a stage skipped because an earlier one failed writes `skipped` with the reason. A record of an
older schema version is refused with one line (run the stage again). The report reads only these
records; it never re-runs a model and never claims more than they hold. `neuronkit check` stages
(`{check}`) are the same StageResult type.

## Evidence per stage

Each stage's `evidence` is one record type of its folder's `evidence.py` (`neuronkit/stages/<name>/`); every
field is always present (null when it does not apply). Units: {units}.
"""

_CHECK_HEADER = """## Evidence per `neuronkit check` stage

`neuronkit check --json OUT` writes `model`, `dtype`, `status`, `ok`, `weights` and `stages`: one
StageResult per check stage, whose `evidence` is the record below (empty when the stage was skipped).
The workbook's eager record extends the eager one with the generate and train records; its compile
record is the compile and timing records together.
"""


def markdown() -> str:
    """docs/run-directory.md: the record layout and every evidence field with its label and unit."""
    units = "; ".join(f"`{u}` {d}" for u, d in UNITS.items() if u)
    files = [f"stages/{stage.record_file}" for stage in WORKBOOK]
    records = "\n".join(f"  {name:<28}" + ("one StageResult per stage (neuronkit/pipeline/record.py)" if not i else "")
                        for i, name in enumerate(files))
    parts = [_HEADER.format(version=SCHEMA_VERSION, check="`, `".join(step.name for step in CHECK_STEPS),
                            units=units, records="\n".join(line.rstrip() for line in records.splitlines()))]
    seen: list[type[Any]] = []
    for stage in WORKBOOK:
        parts.append(_section(f"{stage.name}: `{stage.evidence.__name__}`", stage.evidence, seen))
    parts.append(_section("script.json: `ScriptEvidence`", ScriptEvidence, seen))
    parts.append(_CHECK_HEADER)
    for step in CHECK_STEPS:
        parts.append(_section(f"check {step.name}: `{step.evidence.__name__}`", step.evidence, seen))
    parts.append("## Records inside the evidence\n")
    index = 0
    while index < len(seen):
        cls = seen[index]
        parts.append(_section(f"`{cls.__name__}`", cls, seen, level="###"))
        index += 1
    return "\n".join(parts).rstrip() + "\n"


def _section(title: str, cls: type[Any], seen: list[type[Any]], level: str = "###") -> str:
    lines = [f"{level} {title}", "", " ".join((cls.__doc__ or "").split()), "",
             "| key | type | label | unit | notes |", "|---|---|---|---|---|"]
    for spec in specs(cls):
        for nested in (spec.block, spec.row):
            if nested is not None and nested not in seen:
                seen.append(nested)
        lines.append(f"| `{spec.name}` | {spec.type_text} | {spec.label} | {spec.unit} | {spec.doc} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from pathlib import Path

    text = markdown()
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text, encoding="utf-8")
    else:
        print(text, end="")
