"""The run configuration: what a run runs on and every stage's options, defined once, passed whole.

`RunConfig` holds the parameters every stage shares (dtype, example-input shape, how much of a large model
the stages run) and each stage's own options: the options dataclass of its folder
(`neuronkit/stages/<name>/__init__.py`), read with `config.of(EagerOptions)`. The CLI (`neuronkit run`,
`neuronkit check`) and a notebook's parameters build one; `check()`, `run_workbook()` and every stage take it
whole. `with_options(train_steps=1, ...)` sets options by name wherever a stage declares them, as a notebook's
parameters cell and papermill's `-p NAME VALUE` name them. `params.json` stores the shared part beside the
model (`neuronkit.workbook.params.Params`); the notebooks' parameters cells must spell values (papermill
injects over them), so a test holds them to these defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from neuronkit.errors import DTYPES, NeuronkitInputError
from neuronkit.pipeline.record import RunDir
from neuronkit.pipeline.stage import OPTIONS

OptionsT = TypeVar("OptionsT")


def option(default: Any, flag: str, help: str, metavar: str | None = None,
           choices: tuple[str, ...] | None = None) -> Any:
    """A run parameter: its default, its command-line flag and what it does."""
    return field(default=default, metadata={"flag": flag, "help": help, "metavar": metavar, "choices": choices})


@dataclass(frozen=True)
class RunConfig:
    """What a run runs on: dtype, example-input shape and how much of a large model the stages run; and
    the stages' options that differ from their defaults (`of`, `with_options`)."""

    dtype: str = option("float32", "--dtype", "weights and compute dtype; bfloat16/float16 run the device under "
                        "torch.autocast('neuron') against the CPU under torch.autocast('cpu')", choices=DTYPES)
    seq_len: int = option(16, "--seq-len", "tokens per example input", metavar="N")
    batch_size: int = option(1, "--batch-size", "example inputs per batch", metavar="N")
    layers: int = option(0, "--layers", "run parity, compile and profiling on a slice of the first K blocks; 0: as "
                         "many as fit the memory and time budget, the full model when it fits", metavar="K")
    full_model: bool = option(False, "--full-model", "run every stage on the whole model, however large")
    stage_options: tuple[Any, ...] = ()  # each stage's options, where not the defaults

    def of(self, kind: type[OptionsT]) -> OptionsT:
        """The stage options of type `kind` (a stage folder's, e.g. `EagerOptions`): as set, else its defaults."""
        return next((o for o in self.stage_options if isinstance(o, kind)), None) or kind()

    def with_options(self, **values: Any) -> RunConfig:
        """This configuration with options set by name: a shared parameter (`dtype`, ...), or a stage
        option (`train_steps`, ...) in every stage that declares one of that name. An unknown name, or a
        value a stage's options refuse, is one NeuronkitInputError."""
        shared = {k: v for k, v in values.items() if k in names()}
        rest = {k: v for k, v in values.items() if k not in shared}
        unknown = sorted(set(rest) - set(option_names()))
        if unknown:
            raise NeuronkitInputError(f"unknown option(s) {', '.join(unknown)}; the run takes: "
                                      f"{', '.join(sorted(option_names()))}")
        stage_options = list(self.stage_options)
        for kind in OPTIONS:
            mine = {f.name: rest[f.name] for f in fields(kind) if f.name in rest}
            if mine:
                stage_options = [o for o in stage_options if type(o) is not kind]
                stage_options.append(dataclasses.replace(self.of(kind), **mine))
        return dataclasses.replace(self, **shared, stage_options=tuple(stage_options))

    def shared(self) -> dict[str, Any]:
        """The parameters every stage shares, by name (what params.json stores beside the model)."""
        return {name: getattr(self, name) for name in names()}


DEFAULTS = RunConfig()


@dataclass(frozen=True)
class Params:
    """One run: the model (a bundled name or a checkpoint directory), the run directory and the run
    configuration; `params.json` records the model and the configuration's shared part."""

    model: str
    run_dir: str
    config: RunConfig = DEFAULTS

    @property
    def run(self) -> RunDir:
        return RunDir(self.run_dir)

    def with_options(self, **values: Any) -> Params:
        """This run with options set by name (`RunConfig.with_options`)."""
        return dataclasses.replace(self, config=self.config.with_options(**values)) if values else self

    def to_dict(self) -> dict[str, Any]:
        """The run's parameters as `params.json` stores them: the model and the run configuration's shared
        part (the run directory is the folder itself; the stages' options are each notebook's own)."""
        return {"model": self.model, **self.config.shared()}


RUNS_FOLDER = "runs"


def model_name(model: str | Path) -> str:
    """A model's short name: a bundled name as it is, a checkpoint directory's folder name (a `config.json`
    given: its folder's)."""
    source = Path(model)
    return source.parent.name if source.suffix == ".json" else source.name


def default_run_dir(model: str | Path, root: str | Path = ".") -> Path:
    """The run directory of `model` when none is given: `runs/<model name>` under `root`, the folder
    `neuronkit run MODEL` is started in (the current one; for the notebooks, run in `notebooks/`, the
    repository root `..`), so the CLI and the notebooks run by hand fill the same directory."""
    return Path(root) / RUNS_FOLDER / model_name(model)


def names() -> tuple[str, ...]:
    """The shared parameters' names, in order (the fields with a command-line flag)."""
    return tuple(f.name for f in fields(RunConfig) if "flag" in f.metadata)


def option_names() -> tuple[str, ...]:
    """Every name `RunConfig.with_options` takes: the shared parameters, then each stage's options."""
    return tuple(dict.fromkeys([*names(), *(f.name for kind in OPTIONS for f in fields(kind))]))


def flags() -> dict[str, str]:
    """Parameter name → its command-line flag (`seq_len` → `--seq-len`)."""
    return {f.name: f.metadata["flag"] for f in fields(RunConfig) if "flag" in f.metadata}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per shared parameter to a subcommand's parser, with its default."""
    for f in fields(RunConfig):
        if "flag" not in f.metadata:
            continue
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


def from_args(args: argparse.Namespace) -> RunConfig:
    """The run configuration a parsed command line gives."""
    return RunConfig(**{name: getattr(args, name) for name in names()})
