"""`neuronkit run MODEL [--out DIR]`: the whole workbook from the command line (DIR: runs/<model name>).

Prints one line per notebook (stage status and seconds), the report's path and its verdict. Exit codes,
as for `audit` and `check`: 0 ready (caveats allowed), 1 blocked, incomplete, a notebook failed (the
report is rendered all the same) or a `--fail-on` finding in the model's path, 2 bad input, found before any
kernel starts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from neuronkit.errors import NeuronkitInputError
from neuronkit.kernels.starter import KERNEL_MODES, KERNEL_NAME
from neuronkit.pipeline import config as run_config
from neuronkit.reporting.cli import add_fail_on, exit_code
from neuronkit.run_command import parse_value
from neuronkit.workbook.runner import CELL_TIMEOUT_S, START_TIMEOUT_S


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the run subcommand's arguments."""
    parser.add_argument("model", metavar="MODEL", help="a bundled model (tiny-qwen3, tiny-bert) or a checkpoint directory")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="the run directory to fill (default runs/<model name>, where the notebooks run by hand "
                             "write theirs)")
    run_config.add_arguments(parser)  # --dtype, --seq-len, --batch-size, --layers, --full-model
    run_config.add_inputs_argument(parser, "prompts.txt (one per line), the lengths notebook 04's bucket advice "
                                           "bounds (the same as -p prompts_file FILE)")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a notebook parameter, VALUE read as JSON when it parses (e.g. -p max_new_tokens 8)")
    parser.add_argument("--notebooks", type=Path, default=None, metavar="DIR", help="the notebooks folder to run")
    parser.add_argument("--kernel", default=KERNEL_NAME, help=f"Jupyter kernel name (default {KERNEL_NAME})")
    parser.add_argument("--cell-timeout", type=int, default=CELL_TIMEOUT_S, metavar="S",
                        help=f"seconds one cell may run before the run stops with an error (default {CELL_TIMEOUT_S})")
    parser.add_argument("--start-timeout", type=int, default=START_TIMEOUT_S, metavar="S",
                        help=f"seconds a kernel may take to start (default {START_TIMEOUT_S})")
    parser.add_argument("--kernels", default="fork", choices=KERNEL_MODES,
                        help="how each notebook's kernel starts: fork (the default), forked from one process that "
                             "imported torch and the libraries once, during the previous notebook (Linux; elsewhere "
                             "warm); warm, a fresh interpreter during the previous notebook; cold, a fresh one when "
                             "its notebook begins (one kernel at a time; slowest)")
    parser.add_argument("--overwrite", action="store_true", help="clear a previous run in --out first")
    add_fail_on(parser)
    parser.add_argument("--random-weights", action="store_true",
                        help="run the model its config describes on random weights (saved into --out first)")
    from neuronkit.port.workbook import configure_script_arguments
    configure_script_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run the workbook and print where the report went."""
    from neuronkit.policy import fail_on_categories
    from neuronkit.port.workbook import check_script, record_script
    from neuronkit.workbook.runner import Execution, run_workbook

    # jsonschema (through papermill's nbformat) imports its optional IRI-syntax checker when present, and
    # rfc3987_syntax builds an Earley parser as it loads: 1.5-3 s of CPU for a format no notebook schema
    # uses. This process runs nothing else, so it goes without it (the library leaves other programs alone).
    sys.modules.setdefault("rfc3987_syntax", None)

    fail_on = fail_on_categories(args.fail_on)
    script = check_script(args)  # bad input before any kernel starts
    options: dict[str, Any] = {}  # the run configuration's: shared parameters and the stages' options
    extra: dict[str, Any] = {}  # any other notebook parameter
    for name, raw in args.parameter:
        if name in ("model", "run_dir", "out"):
            raise NeuronkitInputError(f"-p {name}: give the model as MODEL and the run directory as --out")
        (options if name in run_config.option_names() else extra)[name] = parse_value(raw)
    if args.inputs is not None:
        options["prompts_file"] = prompts_file(args.inputs, options.get("prompts_file"))
    execution = Execution(args.kernels, args.kernel, args.cell_timeout, args.start_timeout, args.notebooks)
    out = args.out if args.out is not None else run_config.default_run_dir(args.model)
    result = run_workbook(args.model, out, run_config.from_args(args).with_options(**options), parameters=extra,
                          execution=execution, overwrite=args.overwrite, random_weights=args.random_weights)
    script_ok = record_script(script, args, result.run_dir) if script else True
    data = json.loads((result.run_dir / "report.json").read_text())
    if data.get("ran_on"):
        print(data["ran_on"])
    print(f"verdict: {data['verdict']}")  # the last line, for scripts that read it
    return exit_code(data, fail_on) if result.ok and script_ok else 1


def prompts_file(inputs: Path, given: Any) -> str:
    """`--inputs FILE` as the workbook's `prompts_file` parameter: a prompts file that exists, given once."""
    if given is not None:
        raise NeuronkitInputError("give your prompts once: --inputs FILE or -p prompts_file FILE")
    if inputs.suffix != ".txt":
        raise NeuronkitInputError(f"--inputs {inputs}: the workbook takes a prompts file (.txt, one prompt per line); "
                                  "a .safetensors of inputs is `neuronkit check`'s")
    if not inputs.is_file():
        raise NeuronkitInputError(f"--inputs {inputs}: no such file")
    return str(inputs.resolve())
