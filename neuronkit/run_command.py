"""The `neuronkit run` command line for a set of workbook parameters: what the report prints to repeat a
run and what notebook 00 shows, built in one place so the two cannot drift from the CLI."""

from __future__ import annotations

import json
import shlex
from typing import Any

from neuronkit.pipeline.config import DEFAULTS, flags

# Parameters `neuronkit run` takes as named options (the run configuration's); every other parameter goes
# as `-p NAME VALUE`.
RUN_FLAGS: dict[str, str] = flags()
# Named options whose default is left out of the command (`--full-model` is a switch, `--layers 0` automatic).
_DEFAULTS: dict[str, Any] = {"layers": DEFAULTS.layers, "full_model": DEFAULTS.full_model}
# Parameters that are the command's positional MODEL and its --out, never `-p`.
_PLACES = ("model", "run_dir", "out")
# The side record `neuronkit run` leaves in the run directory: the stages' options and the other notebook
# parameters it was given beyond params.json's shared ones (`--inputs`, `-p`), for the report's command.
RUN_OPTIONS = "run_options.json"


def run_command(model: str, out: str | None, params: dict[str, Any]) -> str:
    """`neuronkit run MODEL --out OUT` with `params` as options, shell-quoted (`out` None: the default run
    directory, runs/<model name>, and no `--out`)."""
    command = ["neuronkit", "run", str(model), *(["--out", str(out)] if out is not None else [])]
    for key, value in params.items():
        if key in _PLACES or (key in _DEFAULTS and value == _DEFAULTS[key]):
            continue
        if key == "full_model":
            command.append(RUN_FLAGS[key])
            continue
        command += [RUN_FLAGS[key]] if key in RUN_FLAGS else ["-p", key]
        command.append(cli_value(value))
    return shlex.join(command)


def cli_value(value: Any) -> str:
    """A value as `neuronkit run` reads it back: JSON, except that a string which is not JSON stays bare."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except json.JSONDecodeError:
            return value
    return json.dumps(value)


def parse_value(raw: str) -> Any:
    """`8` → 8, `true` → True, `"a"` → 'a', anything that is not JSON stays a string (`cli_value`'s inverse)."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
