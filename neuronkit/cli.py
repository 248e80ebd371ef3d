"""`neuronkit` command line: each subcommand lives with the feature it drives.

A subcommand module provides `configure_parser(parser)` and `run(args) -> int`. Exit codes are the same
for every command, so CI can gate on them: 0 ready (caveats allowed), 1 blocked or a stage failed, 2 bad
input (`NeuronkitInputError`, a missing file), each error on one line; `--debug` adds the traceback.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import logging
import os
import signal
import sys
import traceback
import warnings
from pathlib import Path, PurePath
from typing import Iterator, Sequence

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
    """The parser; only the `only` subcommand's module is imported and its options added (each pulls in
    heavy parts of the stack, such as Dynamo, that other commands do not need; `neuronkit --help` needs none)."""
    parser = argparse.ArgumentParser(prog="neuronkit", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--debug", action="store_true", help="print the full traceback of an error")
        if only == name:
            importlib.import_module(module).configure_parser(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The `neuronkit` command line, `argv` its arguments (default: this process's); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    if command not in SUBCOMMANDS:  # `--help`, no command or a misspelt one: argparse answers, no torch needed
        build_parser().parse_args(argv)
    import torch  # noqa: F401 - before any other neuronkit module (neuronkit/__init__.py)

    args = build_parser(command).parse_args(argv)
    try:
        _writable(getattr(args, "json", None))  # before the work, not after it
        with _library_notes(not args.debug, args.command in LOADS_MODELS) as notes:
            code = importlib.import_module(args._module).run(args)
        _print_notes(notes)
        return code
    except (NeuronkitInputError, FileNotFoundError, NotADirectoryError) as exc:
        _error(args, str(exc))
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM under `console`: what the command started is stopped
        _error(args, f"interrupted ({exc.args[0] if exc.args else 'SIGINT'}): stopped before it finished")
        return 1
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback, unless --debug
        _error(args, f"{type(exc).__name__}: {' '.join(str(exc).split())} (rerun with --debug for the traceback)")
        return 1


def console() -> None:
    """The `neuronkit` console script: `main()`, then exit without tearing the interpreter down. Once
    torch, transformers and Jupyter are imported, freeing every module and object takes 1-2 s of CPU
    after the command is done; the exit handlers still run and the output is flushed, and the operating
    system reclaims the rest (as `os._exit` does for the fork server)."""
    argv = sys.argv[1:]
    # SIGTERM (CI cancelling a job, `timeout`, `docker stop`) unwinds as Ctrl-C does, so the command's own
    # clean-up runs (a port run's processes and temporary folder, a workbook's kernels); a second one kills.
    signal.signal(signal.SIGTERM, _terminated)
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


def _writable(out: object) -> None:
    """An output file named by `--json OUT` that could never be written is bad input, said before any work."""
    if not isinstance(out, (str, PurePath)) or str(out) == "-":
        return
    path = Path(out).expanduser()
    if path.is_dir():
        raise NeuronkitInputError(f"--json {out}: a directory; name a file to write")
    if not path.parent.is_dir():
        raise NeuronkitInputError(f"--json {out}: no directory {path.parent} to write it in")


def _terminated(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise KeyboardInterrupt("SIGTERM")


LOADS_MODELS = {"check", "audit", "plan", "run"}  # commands that drive transformers in this process (run: its checks)


@contextlib.contextmanager
def _library_notes(enabled: bool, transformers_too: bool) -> Iterator[dict[str, list[str]]]:
    """Warnings and log notices of the libraries a command drives (transformers, torch's Dynamo, ...), kept
    back while it runs, by library, for `_print_notes`: a library's own notice (a kernel it falls back from,
    a cache Dynamo traces through, with its source excerpt) should read as the library's, not as a neuronkit
    finding or a traceback. neuronkit's own warnings and the user's print as they come; with `--debug`, all."""
    notes: dict[str, list[str]] = {}
    if not enabled:
        yield notes
        return
    show = warnings.showwarning

    def keep(message: Warning | str, category: type[Warning], filename: str, lineno: int, *rest: object) -> None:
        library = _library(filename)
        if library is None:
            show(message, category, filename, lineno, *rest)  # type: ignore[arg-type]
        else:
            notes.setdefault(library, []).append(str(message))

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            notes.setdefault(record.name.split(".")[0], []).append(record.getMessage())

    handler = Keep(logging.WARNING)
    tlog = None
    torch_handlers: dict[logging.Logger, list[logging.Handler]] = {}
    if transformers_too:
        import transformers.utils.logging as tlog  # imports torch, whose logging set-up replaces its handlers

        tlog.disable_default_handler()
        tlog.add_handler(handler)
        # torch's own log records (fake tensors' "failed while attempting to run meta for ...", with the
        # traceback of a model's shape error, which the command then names in one line) are notes too: torch
        # gives each of its registered loggers a handler of its own
        torch_handlers = {log: log.handlers for name, log in logging.root.manager.loggerDict.items()
                          if isinstance(log, logging.Logger) and name.split(".")[0] == "torch" and log.handlers}
        for log in torch_handlers:
            log.handlers = [handler]
    with warnings.catch_warnings():
        warnings.showwarning = keep
        try:
            yield notes
        finally:
            if tlog is not None:
                tlog.remove_handler(handler)
                tlog.enable_default_handler()
                for log, handlers in torch_handlers.items():
                    log.handlers = handlers


def _library(filename: str) -> str | None:
    """The installed package a warning was raised in (`torch`, `transformers`), or None for neuronkit's own
    code and anything not installed as a package (the user's script)."""
    parts = PurePath(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts and parts.index(marker) + 1 < len(parts):
            name, *rest = parts[parts.index(marker) + 1:]
            if name == "neuronkit":
                return None
            return f"{name}.{rest[0]}" if name == "torch" and len(rest) > 1 else name.removesuffix(".py")
    return None


def _print_notes(notes: dict[str, list[str]]) -> None:
    """One line per library: how many notices it gave, and the first one's first sentence."""
    if not notes:
        return
    print("notes from the libraries this ran (theirs, not findings about the neuron device; --debug prints them "
          "whole):", file=sys.stderr)
    for library, messages in notes.items():
        first = " ".join(messages[0].split()).split(". ")[0]
        first = first if len(first) <= 160 else first[:159] + "…"
        count = f"{len(messages)} notices, the first" if len(messages) > 1 else "1 notice"
        print(f"  {library}: {count}: {first}", file=sys.stderr)


def _error(args: argparse.Namespace, message: str) -> None:
    if args.debug:
        traceback.print_exc()
    print(f"neuronkit {args.command}: error: {message}", file=sys.stderr)


if __name__ == "__main__":
    console()
