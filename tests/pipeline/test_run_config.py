"""One run configuration (`neuronkit.run_config`): the CLI flags, `check()`'s and `run_workbook()`'s
defaults, the notebooks' parameters cells and params.json all follow it."""

from __future__ import annotations

import argparse
import dataclasses
import ast
import inspect
from dataclasses import asdict
from pathlib import Path

from neuronkit import run_config
from neuronkit.pipeline import WORKBOOK
from neuronkit.run_config import DEFAULTS

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _parameters_cell(source: str) -> dict[str, object]:
    """The literal values a jupytext notebook's `parameters` cell assigns."""
    cell = source.split('# %% tags=["parameters"]', 1)[1].split("\n# %%", 1)[0]
    return {node.target.id: ast.literal_eval(node.value) for node in ast.parse(cell).body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None}


def test_every_stage_notebook_spells_the_run_configuration_defaults() -> None:
    for stage in WORKBOOK:
        declared = _parameters_cell((NOTEBOOKS / f"{stage.notebook}.py").read_text(encoding="utf-8"))
        assert {name: declared.get(name) for name in run_config.names()} == asdict(DEFAULTS), stage.notebook


def test_the_run_and_check_commands_take_their_flags_and_defaults_from_it() -> None:
    from neuronkit.checks import cli as check_cli
    from neuronkit.workbook import cli as run_cli

    for configure, positional in ((run_cli.configure_parser, ["m", "--out", "o"]),
                                  (check_cli.configure_parser, ["m"])):
        parser = argparse.ArgumentParser()
        configure(parser)
        assert run_config.from_args(parser.parse_args(positional)) == asdict(DEFAULTS)
        args = parser.parse_args([*positional, "--seq-len", "32", "--dtype", "bfloat16", "--full-model"])
        assert run_config.from_args(args) == {**asdict(DEFAULTS), "seq_len": 32, "dtype": "bfloat16",
                                              "full_model": True}


def test_the_recorded_run_parameters_are_the_model_and_the_run_configuration() -> None:
    from neuronkit.evidence import RunParams

    assert tuple(f.name for f in dataclasses.fields(RunParams)) == ("model", *run_config.names())


def test_check_run_workbook_and_params_default_to_it(tmp_path: Path) -> None:
    from neuronkit.checks import check
    from neuronkit.workbook import run_workbook
    from neuronkit.workbook.params import Params

    for function in (check, run_workbook):
        signature = inspect.signature(function).parameters
        assert {name: signature[name].default for name in run_config.names()} == asdict(DEFAULTS), function
    params = Params("tiny-qwen3", str(tmp_path))
    assert params.config == DEFAULTS and params.to_dict() == {"model": "tiny-qwen3", **asdict(DEFAULTS)}


def test_run_takes_the_inputs_flag_of_check_as_the_workbooks_prompts_file(tmp_path: Path, monkeypatch,
                                                                          capsys) -> None:
    """`neuronkit run MODEL --inputs prompts.txt`, as a user of `check --inputs` types it: the same as
    `-p prompts_file prompts.txt`; anything else is one line and exit 2, before any kernel starts."""
    from neuronkit import cli
    from neuronkit.errors import NeuronkitInputError
    from neuronkit.workbook import runner

    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Hello\nA longer prompt than the first\n")
    given: list[dict[str, object]] = []

    def run_workbook(model: str, out: Path, **kwargs: object) -> None:
        given.append(kwargs["parameters"])
        raise NeuronkitInputError("stopped before any kernel")

    monkeypatch.setattr(runner, "run_workbook", run_workbook)
    run = ["run", "tiny-qwen3", "--out", str(tmp_path / "run")]
    assert cli.main([*run, "--inputs", str(prompts)]) == 2
    assert cli.main([*run, "-p", "prompts_file", str(prompts)]) == 2
    assert given == [{"prompts_file": str(prompts.resolve())}, {"prompts_file": str(prompts)}]
    capsys.readouterr()
    for inputs, extra, message in ((tmp_path / "missing.txt", [], "no such file"),
                                   (tmp_path / "x.safetensors", [], "the workbook takes a prompts file"),
                                   (prompts, ["-p", "prompts_file", str(prompts)], "give your prompts once")):
        assert cli.main([*run, "--inputs", str(inputs), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert len(given) == 2

    options = set()
    for command in ("run", "check"):  # one definition of the option (run_config.add_inputs_argument)
        sub = cli.build_parser(command)._subparsers._group_actions[0].choices[command]
        action = next(a for a in sub._actions if "--inputs" in a.option_strings)
        options.add((action.dest, action.type, action.metavar, action.default))
    assert options == {("inputs", Path, "FILE", None)}
