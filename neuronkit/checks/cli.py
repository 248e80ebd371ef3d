"""`neuronkit check MODEL [--json OUT] [--dtype float32|bfloat16] [--stages ...] [--random-weights]`: the
staged parity checks (`neuronkit.checks`) as a table. Exit 0 when no stage fails or raises, 1 when one
does (`fail` or `error`); bad input exits 2 through `neuronkit.cli`. A stage that raised is its error's line in
the table; `--debug` prints its traceback whole on stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from neuronkit.pipeline import config as run_config
from neuronkit.pipeline.record import CHECK_STAGES, StageResult
from neuronkit.stages.eager import EagerOptions


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the check subcommand's arguments."""
    parser.add_argument("model", metavar="MODEL",
                        help="checkpoint directory, config.json, or bundled name (tiny-qwen3, tiny-bert, qwen3-100m)")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="also write the report as JSON")
    parser.add_argument("--stages", default=",".join(CHECK_STAGES), metavar="STAGE[,STAGE...]",
                        help=f"stages to run, comma-separated (default: all of {', '.join(CHECK_STAGES)}); "
                             "the stages they compare against are added")
    run_config.add_arguments(parser)  # --dtype, --seq-len, --batch-size, --layers, --full-model
    default = EagerOptions().train_steps
    parser.add_argument("--train-steps", type=int, default=default,
                        help=f"optimizer steps in the training stage (default {default})")
    parser.add_argument("--random-weights", action="store_true",
                        help="build the model from its config with random weights (a checkpoint without weights)")
    run_config.add_inputs_argument(parser, "prompts.txt (one per line, text models; they size the buckets too) or "
                                           "a .safetensors file of named tensors (the forward's arguments), run as "
                                           "the example inputs")


def run(args: argparse.Namespace) -> int:
    """Run the checks, print the table, write the JSON; 1 when a stage failed or raised."""
    from neuronkit.checks import check

    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    report = check(args.model, args.inputs, stages=stages, config=run_config.from_args(args),
                   random_weights=args.random_weights, train_steps=args.train_steps)
    print(report.table())
    if args.json is not None:
        report.to_json(args.json)
        print(f"report: {args.json}")
    _tracebacks(report.stages, args.debug)
    return 0 if report.ok else 1


def _tracebacks(stages: Sequence[StageResult[Any]], debug: bool) -> None:
    """The traceback of each stage that raised, whole, with `--debug`; without it, one line saying how to
    see them (the table gives each error's message)."""
    raised = [s for s in stages if s.status == "error" and s.error]
    if not raised:
        return
    if not debug:
        print(f"neuronkit check: {', '.join(s.stage for s in raised)} raised; rerun with --debug for the "
              "traceback(s)", file=sys.stderr)
        return
    for s in raised:
        print(f"neuronkit check: {s.stage} raised:\n{(s.error or '').rstrip()}", file=sys.stderr)
