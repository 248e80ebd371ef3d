"""The run configuration: the parameters every stage of a run shares, with their defaults, defined once.

`neuronkit run` and `neuronkit check` build these flags from it (`add_arguments`); `check()`,
`run_workbook()`, `audit()`, the example inputs and the notebooks' parameters take their defaults from
it; `params.json` stores it beside the model (`neuronkit.workbook.params.Params`). The notebooks'
parameters cells must spell values (papermill injects over them), so a test holds them to these defaults.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from neuronkit.errors import DTYPES


def option(default: Any, flag: str, help: str, metavar: str | None = None,
           choices: tuple[str, ...] | None = None) -> Any:
    """A run parameter: its default, its command-line flag and what it does."""
    return field(default=default, metadata={"flag": flag, "help": help, "metavar": metavar, "choices": choices})


@dataclass(frozen=True)
class RunConfig:
    """What a run runs on: dtype, example-input shape and how much of a large model the stages run."""

    dtype: str = option("float32", "--dtype", "weights and compute dtype; bfloat16/float16 run the device under "
                        "torch.autocast('neuron') against the CPU under torch.autocast('cpu')", choices=DTYPES)
    seq_len: int = option(16, "--seq-len", "tokens per example input", metavar="N")
    batch_size: int = option(1, "--batch-size", "example inputs per batch", metavar="N")
    layers: int = option(0, "--layers", "run parity, compile and profiling on a slice of the first K blocks; 0: as "
                         "many as fit the memory and time budget, the full model when it fits", metavar="K")
    full_model: bool = option(False, "--full-model", "run every stage on the whole model, however large")


DEFAULTS = RunConfig()


def names() -> tuple[str, ...]:
    """The run configuration's parameter names, in order."""
    return tuple(f.name for f in fields(RunConfig))


def flags() -> dict[str, str]:
    """Parameter name → its command-line flag (`seq_len` → `--seq-len`)."""
    return {f.name: f.metadata["flag"] for f in fields(RunConfig)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per run parameter to a subcommand's parser, with its default."""
    for f in fields(RunConfig):
        meta, default = f.metadata, f.default
        if isinstance(default, bool):
            parser.add_argument(meta["flag"], action="store_true", help=meta["help"])
            continue
        extra = {"metavar": meta["metavar"]} if meta["metavar"] else {}
        parser.add_argument(meta["flag"], type=type(default), default=default, choices=meta["choices"],
                            help=f"{meta['help']} (default {default})", **extra)


def add_inputs_argument(parser: argparse.ArgumentParser, use: str) -> None:
    """The one `--inputs FILE` option of `check` and `run`: the team's own inputs, `use` saying what the
    command does with them (check: its example inputs; run: the prompts notebook 04 sizes its buckets by).
    Not a run parameter: the stages' example inputs keep the run configuration's shape."""
    parser.add_argument("--inputs", type=Path, default=None, metavar="FILE", help=f"your own inputs: {use}")


def from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The run parameters a parsed command line gives, by name."""
    return {name: getattr(args, name) for name in names()}
