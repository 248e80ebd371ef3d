"""Bad input through the command line: one line naming the file and what is wrong, exit 2, for every
command alike, before anything heavy starts; nothing in a pickle runs."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from neuronkit.cli import main
from neuronkit.policy import data_dir

TINY_BERT = data_dir() / "models" / "tiny-bert"


class _Payload:
    """Creates a file when unpickled without weights_only."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _copy(tmp_path: Path, name: str = "ckpt") -> Path:
    return Path(shutil.copytree(TINY_BERT, tmp_path / name))


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("command", ["audit", "check", "run"])
def test_a_pickle_payload_is_refused_and_never_runs(tmp_path, capsys, command):
    folder = _copy(tmp_path)
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "payload-ran"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"w": _Payload(marker)}))
    argv = [command, str(folder)] + (["--out", str(tmp_path / "run")] if command == "run" else [])
    rc = main(argv)
    if command == "audit":  # a weightless audit never opens the weights
        assert rc == 0
    else:
        assert rc == 2 and "pytorch_model.bin is corrupt, truncated or unsafe" in _one_line_error(capsys)
        assert not (tmp_path / "run").exists()
    assert not marker.exists()


@pytest.mark.parametrize("command, damage, expected", [
    ("check", "truncate", "model.safetensors is corrupt, truncated or unsafe"),
    ("run", "truncate", "model.safetensors is corrupt, truncated or unsafe"),
    ("check", "shapes", "has shape"),
    ("run", "shapes", "has shape"),  # from the safetensors header, before any kernel
    ("check", "config", "config.json is not valid JSON"),  # the config is blamed, not the tokenizer
    ("run", "config", "config.json is not valid JSON"),
    ("check", "unbuildable", "cannot build BertForMaskedLM from this config.json: Padding_idx must be within"),
    ("run", "unbuildable", "cannot build BertForMaskedLM from this config.json: Padding_idx must be within"),
    ("check", "unbuildable, no architectures", "cannot build BertLMHeadModel from this config.json: Padding_idx must"),
])
def test_a_damaged_checkpoint_is_one_line_before_any_kernel(tmp_path, capsys, command, damage, expected):
    folder = _copy(tmp_path)
    if damage == "truncate":
        weights = folder / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif damage == "shapes":
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(config | {"intermediate_size": 96}))
    elif damage.startswith("unbuildable"):  # a config transformers' own constructor refuses (an AssertionError)
        config = json.loads((folder / "config.json").read_text()) | {"pad_token_id": 1009}  # vocabulary: 999
        if "no architectures" in damage:  # every candidate class refuses: the first task class's reason
            del config["architectures"]
        (folder / "config.json").write_text(json.dumps(config))
    else:
        (folder / "config.json").write_text('{"model_type": "bert",')
    argv = [command, str(folder)] + (["--out", str(tmp_path / "run")] if command == "run" else ["--stages", "cpu"])
    assert main(argv) == 2
    assert expected in _one_line_error(capsys)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv, expected", [
    (["check", "tiny-bert", "--stages", "train", "--train-steps", "0"], "train_steps must be a positive integer"),
    (["check", "tiny-bert", "--inputs", "/no/such.safetensors"], "not found"),
    # a one-token causal LM's loss is NaN on the CPU and the device alike: bad input, not a device failure
    (["check", "tiny-qwen3", "--seq-len", "1"], "seq_len 1 is too short for a causal LM's loss"),
])
def test_check_parameters(argv, expected, capsys):
    assert main(argv) == 2
    assert expected in _one_line_error(capsys)


@pytest.mark.parametrize("dtype", ["int8", "complex64", "float8_e4m3fn"])
def test_audit_refuses_dtypes_the_device_does_not_compute_in(dtype, capsys):
    with pytest.raises(SystemExit) as info:
        main(["audit", "tiny-bert", "--dtype", dtype])
    assert info.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_python_api_validates_dtype_too():
    import neuronkit

    for call in (neuronkit.check, neuronkit.audit):
        with pytest.raises(neuronkit.NeuronkitInputError, match="not one the neuron device computes in"):
            call("tiny-bert", dtype="int8")


def test_run_refuses_a_used_out_directory_unless_told(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["run", "tiny-bert", "--out", str(out)]) == 2
    assert "--overwrite" in _one_line_error(capsys)
    assert main(["run", "tiny-bert", "--out", str(out), "--overwrite"]) == 2  # not a run directory: kept
    assert "not a neuronkit run directory" in _one_line_error(capsys)
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("name, value, expected", [
    ("max_new_tokens", "-3", "max_new_tokens must be a positive integer, got -3"),
    ("timing_runs", "abc", "timing_runs must be a positive integer, got str 'abc'"),
    ("training", "yes", "training must be true or false, got str 'yes'"),
    ("prompt", "7", "prompt must be text, got int 7"),
])
def test_run_refuses_a_bad_notebook_parameter_before_any_kernel(tmp_path, capsys, name, value, expected):
    assert main(["run", "tiny-bert", "--out", str(tmp_path / "run"), "-p", name, value]) == 2
    assert expected in _one_line_error(capsys) and not (tmp_path / "run").exists()


def test_run_refuses_an_out_that_is_a_file(tmp_path, capsys):
    out = tmp_path / "report.txt"
    out.write_text("mine")
    assert main(["run", "tiny-bert", "--out", str(out)]) == 2
    assert f"--out {out} is a file, not a directory" in _one_line_error(capsys) and out.read_text() == "mine"


def test_run_on_a_config_alone_names_what_to_do(tmp_path, capsys):
    folder = tmp_path / "bare"
    folder.mkdir()
    shutil.copy(TINY_BERT / "config.json", folder / "config.json")
    assert main(["run", str(folder), "--out", str(tmp_path / "run")]) == 2
    assert "pass --random-weights" in _one_line_error(capsys) and not (tmp_path / "run").exists()


def test_a_model_without_an_input_recipe_is_named(tmp_path, capsys):
    llava = tmp_path / "llava"
    llava.mkdir()
    small = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}
    (llava / "config.json").write_text(json.dumps({
        "model_type": "llava", "architectures": ["LlavaForConditionalGeneration"], "image_token_index": 127,
        "text_config": small | {"model_type": "llama", "vocab_size": 128},
        "vision_config": small | {"model_type": "clip_vision_model", "image_size": 32, "patch_size": 8}}))
    assert main(["run", str(llava), "--out", str(tmp_path / "run"), "--random-weights"]) == 2
    assert "LlavaForConditionalGeneration places image features at image tokens inside its text" in \
        _one_line_error(capsys)
    folder = _copy(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"architectures": ["MyBertForMagic"]}))
    assert main(["check", str(folder)]) == 2
    assert "custom code" in _one_line_error(capsys)


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback(monkeypatch, capsys):
    from neuronkit.pipeline.session import Session

    def broken(*args, **kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(Session, "build", broken)
    assert main(["check", "tiny-bert"]) == 1
    assert "RuntimeError: injected (rerun with --debug" in _one_line_error(capsys)
    assert main(["check", "tiny-bert", "--debug"]) == 1
    assert "Traceback" in capsys.readouterr().err
    assert torch.neuron.is_available()


@pytest.mark.parametrize("tensors, expected", [
    ({"input_ids": torch.full((1, 8), 5.0)}, "input_ids must be integer token ids, not float32"),
    ({"input_ids": torch.full((1, 8), 10**6)}, "outside the model's vocabulary 0.."),
    ({"model.embed_tokens.weight": torch.zeros(4, 4)}, "the inputs hold none of what Qwen3ForCausalLM reads"),
])
def test_inputs_any_device_would_refuse_are_refused_in_one_line(tmp_path, capsys, tensors, expected):
    """A team's inputs file with float token ids, ids of another tokenizer, or a weights file given by mistake:
    bad input (exit 2) in neuronkit's words, not the model's IndexError on the CPU stage."""
    from safetensors.torch import save_file

    save_file(tensors, tmp_path / "inputs.safetensors")
    assert main(["check", "tiny-qwen3", "--inputs", str(tmp_path / "inputs.safetensors"), "--stages", "cpu"]) == 2
    assert expected in _one_line_error(capsys)


@pytest.mark.parametrize("command", [["check", "tiny-bert", "--stages", "cpu"], ["audit", "tiny-bert"],
                                     ["plan", "tiny-qwen3", "--serve"], ["port", "train.py"]])
def test_a_json_output_that_cannot_be_written_is_refused_before_the_work(tmp_path, capsys, command):
    assert main([*command, "--json", str(tmp_path)]) == 2
    assert f"--json {tmp_path}: a directory; name a file to write" in _one_line_error(capsys)
    assert main([*command, "--json", str(tmp_path / "no" / "x.json")]) == 2
    assert "no directory" in _one_line_error(capsys)


def test_help_and_a_misspelt_command_answer_without_loading_torch():
    """`neuronkit --help` and a typo are argparse's answers: no subcommand module, no torch (3 s of imports)."""
    import subprocess
    import sys
    code = ("import sys; sys.argv = ['neuronkit']; from neuronkit import cli\n"
            "for argv in (['--help'], ['chek', 'model']):\n"
            "    try: cli.main(argv)\n"
            "    except SystemExit as exc: print('exit', exc.code)\n"
            "print('torch loaded' if 'torch' in sys.modules else 'no torch')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines()[-3:] == ["exit 0", "exit 2", "no torch"], done.stdout + done.stderr
    assert all(name in done.stdout for name in ("check", "run", "port", "plan")), done.stdout
    assert "invalid choice: 'chek'" in done.stderr


def test_run_refusing_bad_input_is_one_line_whatever_transformers_says_first(tmp_path, capsys):
    """transformers warns about this config (its bos/eos ids lie past the vocabulary) while `run` validates it:
    the notice is held back like check's, so the refusal stays the one line on stderr."""
    folder = _copy(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"bos_token_id": 10**6, "eos_token_id": 10**6}))
    out = tmp_path / "report.txt"
    out.write_text("mine")
    assert main(["run", str(folder), "--out", str(out)]) == 2
    assert f"--out {out} is a file, not a directory" in _one_line_error(capsys)
