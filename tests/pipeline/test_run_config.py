"""One run configuration (`neuronkit.pipeline.config`): the CLI flags, `check()`'s and `run_workbook()`'s
defaults, the notebooks' parameters cells, the stages' options and params.json all follow it."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
from dataclasses import asdict
from pathlib import Path

import pytest

from neuronkit.errors import NeuronkitInputError
from neuronkit.pipeline import config as run_config
from neuronkit.pipeline.config import DEFAULTS, RunConfig
from neuronkit.pipeline.stage import WORKBOOK

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _parameters_cell(source: str) -> dict[str, object]:
    """The literal values a jupytext notebook's `parameters` cell assigns."""
    cell = source.split('# %% tags=["parameters"]', 1)[1].split("\n# %%", 1)[0]
    return {node.target.id: ast.literal_eval(node.value) for node in ast.parse(cell).body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None}


def test_every_stage_notebook_spells_the_run_configuration_defaults() -> None:
    """The shared parameters' and its own stage's options' (`Options` of its folder): the notebook's parameters
    cell declares each with its default."""
    for stage in WORKBOOK:
        declared = _parameters_cell((NOTEBOOKS / f"{stage.notebook}.py").read_text(encoding="utf-8"))
        assert {name: declared.get(name) for name in run_config.names()} == DEFAULTS.shared(), stage.notebook
        own = asdict(stage.options()) if stage.options is not None else {}
        undeclared = {"lr"} if stage.name == "eager" else {"prompts_file"} if stage.name == "compile" else set()
        assert {k: declared.get(k) for k in own if k not in undeclared} == \
            {k: v for k, v in own.items() if k not in undeclared}, stage.notebook


def test_the_run_and_check_commands_take_their_flags_and_defaults_from_it() -> None:
    from neuronkit.checks import cli as check_cli
    from neuronkit.workbook import cli as run_cli

    for configure, positional in ((run_cli.configure_parser, ["m", "--out", "o"]),
                                  (check_cli.configure_parser, ["m"])):
        parser = argparse.ArgumentParser()
        configure(parser)
        assert run_config.from_args(parser.parse_args(positional)) == DEFAULTS
        args = parser.parse_args([*positional, "--seq-len", "32", "--dtype", "bfloat16", "--full-model"])
        assert run_config.from_args(args) == RunConfig(seq_len=32, dtype="bfloat16", full_model=True)


def test_the_recorded_run_parameters_are_the_model_and_the_run_configuration() -> None:
    from neuronkit.stages.environment.evidence import RunParams

    assert tuple(f.name for f in dataclasses.fields(RunParams)) == ("model", *run_config.names())


def test_check_run_workbook_and_params_default_to_it(tmp_path: Path) -> None:
    from neuronkit.checks import check
    from neuronkit.workbook import Params, run_workbook

    for function in (check, run_workbook):
        assert inspect.signature(function).parameters["config"].default is DEFAULTS, function
    params = Params("tiny-qwen3", str(tmp_path))
    assert params.config == DEFAULTS and params.to_dict() == {"model": "tiny-qwen3", **DEFAULTS.shared()}


def test_stage_options_are_fields_of_the_run_configuration_set_by_name() -> None:
    """`with_options` sets a shared parameter or each stage's option of that name (`device` in every stage that
    runs on a core); `of` reads a stage's options, its defaults where none were set; a bad value is refused by
    the stage's options in one line, an unknown name with the names the run takes."""
    from neuronkit.stages.compile import CompileOptions
    from neuronkit.stages.eager import EagerOptions
    from neuronkit.stages.profile import ProfileOptions

    config = DEFAULTS.with_options(dtype="bfloat16", train_steps=3, device="neuron:1")
    assert config.dtype == "bfloat16" and config.of(EagerOptions).train_steps == 3
    assert config.of(CompileOptions).device == config.of(ProfileOptions).device == "neuron:1"
    assert DEFAULTS.of(EagerOptions) == EagerOptions() and config.shared()["dtype"] == "bfloat16"
    with pytest.raises(NeuronkitInputError, match="train_steps must be a positive integer"):
        DEFAULTS.with_options(train_steps=0)
    with pytest.raises(NeuronkitInputError, match="unknown option.*warp_speed.*train_steps"):
        DEFAULTS.with_options(warp_speed=9)


def test_no_public_function_takes_more_than_ten_parameters() -> None:
    """Issue 38: one run configuration passed whole, never unpacked into long parameter lists: every public
    function and public class's method of the package, from its syntax tree (`self` and `cls` not counted;
    `*args` and `**options` count one each)."""
    package = Path(__file__).resolve().parents[2] / "neuronkit"
    long = []
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
        functions += [item for node in tree.body if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
                      for item in node.body if isinstance(item, ast.FunctionDef)]
        for function in (f for f in functions if not f.name.startswith("_")):
            a = function.args
            names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)] + [x.arg for x in (a.vararg, a.kwarg) if x]
            if len([n for n in names if n not in ("self", "cls")]) > 10:
                long.append(f"{path.relative_to(package)}: {function.name}")
    assert long == []


def test_run_takes_the_inputs_flag_of_check_as_the_workbooks_prompts_file(tmp_path: Path, monkeypatch,
                                                                          capsys) -> None:
    """`neuronkit run MODEL --inputs prompts.txt`, as a user of `check --inputs` types it: the same as
    `-p prompts_file prompts.txt`; anything else is one line and exit 2, before any kernel starts."""
    from neuronkit import cli
    from neuronkit.stages.compile import CompileOptions
    from neuronkit.workbook import runner

    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Hello\nA longer prompt than the first\n")
    given: list[object] = []

    def run_workbook(model: str, out: Path, config: RunConfig, **kwargs: object) -> None:
        given.append(config.of(CompileOptions).prompts_file)
        raise NeuronkitInputError("stopped before any kernel")

    monkeypatch.setattr(runner, "run_workbook", run_workbook)
    run = ["run", "tiny-qwen3", "--out", str(tmp_path / "run")]
    assert cli.main([*run, "--inputs", str(prompts)]) == 2
    assert cli.main([*run, "-p", "prompts_file", str(prompts)]) == 2
    assert given == [str(prompts.resolve()), str(prompts)]
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
