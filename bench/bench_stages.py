"""What the workbook's device stages cost now that they read the CPU baseline's reference.

Before, the workbook's compile stage (04) ran `neuronkit check`'s cpu, eager, compile and timing stages
(compile was compared with a fresh eager run), and the eager stage (02) recomputed the CPU reference.
Now both read notebook 01's saved `Reference`, and compile is held to it. Two arms per stage,
interleaved run by run (`neuronkit.timing.interleaved_medians`), on the bundled model:

    python bench/bench_stages.py --rounds 3
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from neuronkit.pipeline.check import check
from neuronkit.pipeline.config import DEFAULTS
from neuronkit.pipeline.reference import Reference
from neuronkit.pipeline.session import Session, forward_extras
from neuronkit.stages.cpu_baseline.steps import cpu_reference
from neuronkit.inputs import example_inputs
from neuronkit.models import load_checkpoint, load_tokenizer
from harness import Run, interleaved_medians

MODEL = "tiny-qwen3"


def saved_reference(folder: Path) -> Reference:
    """The reference notebook 01 saves, read back as 02 and 04 read it."""
    model, _ = load_checkpoint(MODEL)
    inputs = example_inputs(model.config, load_tokenizer(MODEL), 1, 16)
    return Reference.load(cpu_reference(model, inputs, **forward_extras(model)).save(folder / "reference.safetensors"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs per arm (default 3)")
    args = parser.parse_args()
    with Run("stages", "Device stages reading the CPU reference", f"python bench/bench_stages.py --rounds "
             f"{args.rounds}") as log, tempfile.TemporaryDirectory() as tmp:
        reference = saved_reference(Path(tmp))

        def run(stages: list[str], reference: Reference | None = None):
            def go() -> None:
                torch._dynamo.reset()
                config = DEFAULTS.with_options(timing_runs=3)
                session = Session.build(MODEL, config=config)
                report = check(session.using(reference=reference) if reference else session, stages)
                if not report.ok:
                    raise SystemExit(report.table())
            return go

        arms = {"compile before (cpu+eager+compile+timing)": run(["eager", "compile", "timing"]),
                "compile now (reference+compile+timing)": run(["compile", "timing"], reference=reference),
                "eager before (cpu+eager+generate+train)": run(["eager", "generate", "train"]),
                "eager now (reference+eager+generate+train)": run(["eager", "generate", "train"], reference=reference)}
        medians = interleaved_medians(arms, runs=args.rounds, warmup=1)
        log.columns(arm="arm", seconds=("median", "{:.2f} s"), ratio=("now / before", "{:.2f}x"))
        log.note = (f"`neuronkit check` on {MODEL}, arms interleaved run by run, medians of {args.rounds}; \"now\" "
                    "reads notebook 01's saved reference.")
        names = list(medians)
        for i, name in enumerate(names):
            now = i % 2 == 1  # each "now" arm follows its "before" arm
            log.row(arm=name, seconds=medians[name] / 1000,
                    ratio=medians[name] / medians[names[i - 1]] if now else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
