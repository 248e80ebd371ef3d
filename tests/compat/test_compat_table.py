"""`neuronkit compat`: the simulator's whole table in AWS's vocabulary, through the command line: known rows
(a native op, a CPU fallback with its dtypes, a collective, a host-only query, an unsupported op), every
format, and bad input as one line with exit 2."""

from __future__ import annotations

import json
import re

import pytest

from neuronkit import cli
from neuronkit.device.process_group.backend import ProcessGroupNeuron
from neuronkit.policy import load_policy
from neuronkit.resources import data_dir


def _rows(markdown: str) -> dict[str, list[str]]:
    """API -> [status, limitations, ATen op, dtypes] from the Markdown tables."""
    rows = {}
    for line in markdown.splitlines():
        match = re.match(r"\| `([^`]+)` \| (.*) \|$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in re.split(r"(?<!\\)\|", match.group(2))]
    return rows


@pytest.fixture(scope="module")
def markdown(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("compat") / "table.md"
    assert cli.main(["compat", "--markdown", "--out", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def test_markdown_rows_for_known_apis(markdown: str) -> None:
    rows = _rows(markdown)
    assert rows["torch.nn.functional.linear"][:3] == ["Y", "Native", "aten::linear"]
    assert rows["torch.Tensor.__mul__"][:3] == ["Y", "Native", "aten::mul"]
    # a CPU fallback names its ATen op and the dtypes (the verdict is per overload, so all of them)
    assert rows["torch.equal"] == ["CPU_FALLBACK", "aten::equal: no native Neuron lowering", "aten::equal",
                                   "all dtypes"]
    # a composite probed into its parts: cov runs aten::equal on the host
    assert rows["torch.cov"][0] == "CPU_FALLBACK" and "via aten::cov" in rows["torch.cov"][1]
    assert rows["torch.distributed.all_reduce"][0] == "Y"
    assert rows["torch.distributed.all_reduce"][1].startswith("Needs a process group (ProcessGroup.allreduce")
    assert rows["torch.distributed.init_process_group"][:2] == ["Y", "Host-only (configuration)"]
    assert rows["torch.distributed.monitored_barrier"][0] == "N"
    assert rows["torch.Tensor.size"][:2] == ["Y", "Host-only (runs no ATen op)"]
    assert rows["torch.Tensor.shape"][:2] == ["Y", "Host-only (a property: tensor metadata)"]
    item = rows["torch.Tensor.item"]
    assert item[0] == "Y" and item[1].startswith("Host-only (reads tensor values back to the host)")
    assert item[2] == "aten::_local_scalar_dense"
    assert rows["torch.lstm"][0] == "N" and "LSTM" in rows["torch.lstm"][1]
    assert rows["torch.nonzero"][:2] == ["Y", "Native (aten::nonzero: data-dependent output shapes)"]
    # what the name alone cannot settle says so, and why
    assert rows["torch.nn.functional.cross_entropy"][0] == "unknown"
    assert "no ATen op named aten::cross_entropy" in rows["torch.nn.functional.cross_entropy"][1]
    sections = re.findall(r"^## (\S+)$", markdown, re.M)
    assert sections == sorted(sections) and {"torch", "torch.Tensor", "torch.distributed", "torch.linalg"} <= set(sections)


def test_every_collective_names_a_method_of_the_process_group() -> None:
    import tomllib

    with (data_dir() / "compat_distributed.toml").open("rb") as fh:
        table = tomllib.load(fh)
    missing = {api: method for api, method in table["collectives"].items() if not hasattr(ProcessGroupNeuron, method)}
    assert not missing


def test_json_and_text_agree_with_the_filters(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compat", "--json", "--namespace", "torch.fft", "--status", "Y", "--status", "CPU_FALLBACK"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["apis"] and {row["namespace"] for row in doc["apis"]} == {"torch.fft"}
    assert {row["status"] for row in doc["apis"]} <= {"Y", "CPU_FALLBACK"}
    assert load_policy().verdict_meta["commit"][:7] in doc["notes"][0]
    assert cli.main(["compat", "--namespace", "torch.fft"]) == 0
    text = capsys.readouterr().out
    assert re.match(r"\d+ public APIs: \d+ Y, \d+ CPU_FALLBACK, \d+ N, \d+ unknown$", text.splitlines()[0])
    # torch.fft.fft decomposes (probed) into the FFT kernel S does not lower
    assert re.search(r"^torch\.fft\.fft +CPU_FALLBACK +aten::_fft_r2c: no native Neuron lowering; via aten::fft_fft",
                     text, re.M)


@pytest.mark.parametrize("argv, message", [
    (["--status", "maybe"], "unknown --status maybe"),
    (["--namespace", "torch.nope"], "unknown --namespace torch.nope"),
    (["--out", "/no/such/dir/t.md"], "--out: directory /no/such/dir does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compat", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("neuronkit compat: error: ") and message in err[-1]
    assert "Traceback" not in "\n".join(err)
