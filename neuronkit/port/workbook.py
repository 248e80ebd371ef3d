"""`neuronkit run MODEL --script train.py`: the workbook's "Your script" section. The script is scanned before
any kernel starts (an unparsable file, the script or a module it imports, is bad input), run after the notebooks on the simulated device, and
recorded as `script.json`; the report is then rendered again with it."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from neuronkit.errors import NeuronkitInputError, positive_int_problem
from neuronkit.port.scan import Project, scan_project


def configure_script_arguments(parser: argparse.ArgumentParser) -> None:
    """`--script`, `--script-args`, `--script-steps` on `neuronkit run`."""
    parser.add_argument("--script", type=Path, metavar="TRAIN.py",
                        help="your training script: scanned for CUDA, rewritten and run for --script-steps "
                             "optimizer steps; the report gains a 'Your script' section")
    parser.add_argument("--script-args", default="", metavar="ARGS",
                        help="the script's arguments, one string; {model} is the path of the checkpoint the "
                             "notebooks ran (with --random-weights, the one saved into --out) "
                             "(e.g. --script-args '--model {model} --lr 1e-4')")
    parser.add_argument("--script-steps", type=int, default=5, metavar="N",
                        help="optimizer steps of the script's run (default 5)")


def check_script(args: argparse.Namespace) -> Project | None:
    """The scan of `--script` and the local modules it imports (None without one); raises NeuronkitInputError
    for a bad script or steps."""
    if args.script is None:
        if args.script_args:
            raise NeuronkitInputError("--script-args needs --script")
        return None
    if problem := positive_int_problem("--script-steps", args.script_steps):
        raise NeuronkitInputError(problem)
    if not args.script.is_file():
        raise NeuronkitInputError(f"--script {args.script}: no such file")
    project = scan_project([args.script])
    if project.not_scanned:  # a module it imports: the record has no place for it, and the run would fail on it
        raise NeuronkitInputError(str(project.not_scanned[0]))
    return project


def record_script(project: Project, args: argparse.Namespace, run_dir: Path) -> bool:
    """Run the rewritten script, write `run_dir/script.json`, re-render the report; whether it is ready."""
    from neuronkit.models import resolve_model
    from neuronkit.port import record
    from neuronkit.port.run import run_script, run_summary
    from neuronkit.reporting import report
    from neuronkit.pipeline.record import RunDir

    # the model the notebooks ran: with --random-weights, the checkpoint saved into the run directory
    model = resolve_model(RunDir(run_dir).read_params().get("model", args.model)).resolve()
    script_args = [a.replace("{model}", str(model)) for a in shlex.split(args.script_args)]
    result = run_script(project, steps=args.script_steps, script_args=script_args, workdir=run_dir / "artifacts" /
                        "script")
    print(run_summary(result))
    evidence = record.build(project.scans, result)
    record.write(run_dir, evidence)
    report(run_dir)
    print(f"your script: {evidence.verdict} (the report's 'Your script' section)")
    return evidence.verdict == "ready"
