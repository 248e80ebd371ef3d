"""`neuronkit` command line: each subcommand lives with the feature it drives.

A subcommand module provides `configure_parser(parser)` and `run(args) -> int`. Exit codes are the same
for every command, so CI can gate on them: 0 ready (caveats allowed), 1 blocked or a stage failed, 2 bad
input (`NeuronkitInputError`, a missing file), each error on one line; `--debug` adds the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from typing import Sequence

from neuronkit.errors import NeuronkitInputError

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "detect": ("neuronkit.device.detect", "report whether the neuron device is real, simulated or absent"),
    "audit": ("neuronkit.op_audit.cli", "list the aten ops a model runs and classify them against Neuron support"),
    "check": ("neuronkit.checks.cli", "staged parity checks: CPU, eager on neuron, training, compiled"),
    "run": ("neuronkit.workbook.cli", "run the whole workbook with papermill and write the report"),
    "report": ("neuronkit.reporting.cli", "render report.html and report.json from a run directory"),
    "compat": ("neuronkit.compat.cli", "the simulator's PyTorch API compatibility table, in AWS's vocabulary"),
    "plan": ("neuronkit.planner.cli", "per-rank memory and collectives of a parallel layout, before renting"),
    "port": ("neuronkit.port.cli", "find the CUDA in a training script, rewrite what is mechanical, run it"),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with `only`, just that subcommand's module is imported (each pulls in heavy parts
    of the stack, such as Dynamo, that other commands do not need)."""
    parser = argparse.ArgumentParser(prog="neuronkit", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--debug", action="store_true", help="print the full traceback of an error")
        if only in (None, name):
            importlib.import_module(module).configure_parser(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The `neuronkit` command line, `argv` its arguments (default: this process's); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    import torch  # noqa: F401 - before any other neuronkit module (neuronkit/__init__.py)

    args = build_parser(command if command in SUBCOMMANDS else None).parse_args(argv)
    try:
        return importlib.import_module(args._module).run(args)
    except (NeuronkitInputError, FileNotFoundError, NotADirectoryError) as exc:
        _error(args, str(exc))
        return 2
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback, unless --debug
        _error(args, f"{type(exc).__name__}: {' '.join(str(exc).split())} (rerun with --debug for the traceback)")
        return 1


def console() -> None:
    """The `neuronkit` console script: `main()`, then exit without tearing the interpreter down. Once
    torch, transformers and Jupyter are imported, freeing every module and object takes 1-2 s of CPU
    after the command is done; the exit handlers still run and the output is flushed, and the operating
    system reclaims the rest (as `os._exit` does for the fork server)."""
    import atexit
    import os

    argv = sys.argv[1:]
    if next((a for a in argv if not a.startswith("-")), None) == "run" and not {"-h", "--help"} & set(argv):
        # `neuronkit run`'s fork server, started before torch is imported (neuronkit/__init__.py). Only the
        # command does this: main()'s in-process callers have torch already, and their run starts its own
        from neuronkit.kernels.starter import start_early  # standard library and jupyter_client only

        start_early(argv)
    code = main(argv)
    atexit._run_exitfuncs()  # what interpreter shutdown would run first: logging's flush, temporary files
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _error(args: argparse.Namespace, message: str) -> None:
    if args.debug:
        traceback.print_exc()
    print(f"neuronkit {args.command}: error: {message}", file=sys.stderr)


if __name__ == "__main__":
    console()
