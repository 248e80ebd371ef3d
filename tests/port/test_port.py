"""`neuronkit port`: the static pass over a corpus of CUDA-style scripts written for these tests
(tests/port/corpus/, each matched line annotated `# expect: RULE-ID ...`), the rewrite's round trip, the rules'
targets on the simulated device, the command's outputs and exit codes, and `--run`."""

from __future__ import annotations

import ast
import difflib
import importlib
import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import torch
import port_rules_page
from conftest import RANK_ENV, ROOT, TINY_QWEN3

from neuronkit.cli import main
from neuronkit.errors import NeuronkitInputError
from neuronkit.port import scan
from neuronkit.port.edits import HELPERS_HEADER
from neuronkit.port.rules import PUBLIC_SOURCE, load_rules
from neuronkit.port.scan import scan_paths, scan_source
from neuronkit.resources import data_dir

CORPUS = ROOT / "tests" / "port" / "corpus"
CORPUS_FILES = sorted(CORPUS.glob("*.py"))
EXAMPLE = data_dir() / "examples" / "train_cuda.py"
S_REPO = Path("/work/.mirror/parmoham-aws+test-repo-parmoham/repo")


def _expected(path: Path) -> Counter:
    wanted: Counter = Counter()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if m := re.search(r"# expect: (.+)$", line):
            wanted.update((number, rule) for rule in m.group(1).split())
    return wanted


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_every_cuda_use_in_the_corpus_is_found_with_its_rule(path):
    (scan,) = scan_paths([path])
    assert Counter((f.line, f.rule.id) for f in scan.findings) == _expected(path)


def test_every_rule_has_a_corpus_line():
    covered = {rule for path in CORPUS_FILES for _, rule in _expected(path)}
    assert {rule.id for rule in load_rules()} - covered == set()


@pytest.mark.parametrize("path", [*CORPUS_FILES, EXAMPLE], ids=lambda p: p.name)
def test_the_rewritten_copy_parses_and_its_diff_touches_only_fixed_lines(path):
    """Every line the rewrite changes carries a finding it fixed; lines are only added by the native helpers
    (copied after the imports), so a line of the original keeps its number up to them."""
    (scan,) = scan_paths([path])
    compile(scan.rewritten, str(path), "exec")
    before, after = scan.original.splitlines(), scan.rewritten.splitlines()
    fixed = {f.line for f in scan.findings if f.fixed}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if tag == "insert":
            assert HELPERS_HEADER in "\n".join(after[j1:j2]) or all(not line.strip() for line in after[j1:j2])
        elif tag != "equal":
            assert tag == "replace" and i2 - i1 == j2 - j1 and set(range(i1 + 1, i2 + 1)) <= fixed, (tag, i1, i2)
    assert all(f.category == "rewrite" for f in scan.findings if f.fixed)
    kept = [line for j, line in enumerate(after, 1) if j not in scan.added_lines]
    assert len(kept) == len(before)  # a line of the original keeps its place, less the helpers
    assert all(scan.original_line(j) == i for i, j in enumerate(
        (j for j in range(1, len(after) + 1) if j not in scan.added_lines), 1))


def test_rewrites_read_as_torchneuron_code():
    scan = scan_source('import torch\nfrom torch.cuda import synchronize\n'
                       'x = torch.ones(1).cuda(rank, non_blocking=True)\ny = m.cuda()\nz = m.cuda(1)\n'
                       'torch.cuda.synchronize()\nsynchronize()\ns = f"cuda:{rank}"\n'
                       'with torch.cuda.amp.autocast(dtype=torch.bfloat16):\n    pass\n'
                       'dist.init_process_group("nccl", device_id=rank)\nif t.is_cuda:\n    t = t.cuda()\n'
                       'model = torch.compile(model)\nscaler = torch.cuda.amp.GradScaler()\nimport torch.distributed as dist\n'
                       'd = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"\n')
    assert scan.rewritten.splitlines() == [
        "import torch", "from torch.neuron import synchronize",
        "x = torch.ones(1).to(rank, non_blocking=True)", 'y = m.to("neuron")',
        'z = m.to("neuron:1")', "torch.neuron.synchronize()", "synchronize()", 's = f"neuron:{rank}"',
        'with torch.autocast("neuron", dtype=torch.bfloat16):', "    pass", 'dist.init_process_group("neuron")',
        "if t.is_neuron:", '    t = t.to("neuron")', 'model = torch.compile(model, backend="neuron")',
        'scaler = torch.amp.GradScaler("neuron")', "import torch.distributed as dist",
        'd = "neuron" if torch.accelerator.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"']


def test_a_device_string_passed_to_a_torch_neuron_function_that_takes_none_is_made_a_torch_device():
    """S's set_device, get_device_name and memory functions take an index or a torch.device and raise for a
    string: a string (a literal, a formatted one, a name or argparse option given one) is wrapped; an index, a
    torch.device, or a name that may be None (torch.device(None) raises) is left as it was."""
    scan = scan_source(
        "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument('--device', default='cuda')\n"
        "args = p.parse_args()\nrank = 0\ndevice = f'cuda:{rank}'\ndev = torch.device('cuda', rank)\n"
        "torch.cuda.set_device(device)\ntorch.cuda.set_device(rank)\ntorch.cuda.set_device(args.device)\n"
        "torch.cuda.max_memory_allocated('cuda:%d' % rank)\ntorch.cuda.memory_allocated(dev)\n"
        "def log(where=None):\n    print(torch.cuda.memory_summary(where))\n"
        "torch.accelerator.memory_allocated(device_index=rank)\n")
    assert scan.rewritten.splitlines()[8:] == [
        "torch.neuron.set_device(torch.device(device))", "torch.neuron.set_device(rank)",
        "torch.neuron.set_device(torch.device(args.device))",
        "torch.neuron.max_memory_allocated(torch.device('neuron:%d' % rank))", "torch.neuron.memory_allocated(dev)",
        "def log(where=None):", "    print(torch.neuron.memory_summary(where))",
        "torch.neuron.memory_allocated(device=rank)"]
    noted = {f.line for f in scan.findings if f.note and "torch.device(...)" in f.note}
    assert noted == {9, 11, 12}


def test_a_cuda_check_keeps_the_path_the_script_took_and_shows_both_branches():
    """The image trainer that wrapped its model in DataParallel once `device_count()` was rewritten: the check
    reads as without CUDA, its branch is shown, and the blocker only that branch reaches is a decision."""
    scan = scan_source("import torch\nmodel = torch.nn.Linear(2, 2)\nif torch.cuda.device_count() > 1:\n"
                       "    model = torch.nn.DataParallel(model)\nelse:\n    model = model.float()\n")
    assert scan.rewritten == scan.original
    check, wrapper = scan.findings
    assert (check.rule.id, check.category, check.fixed) == ("device-count", "decide", False)
    assert check.note == ("reads False on neuron, as without CUDA or XLA: line 6 runs, line 4 does not run "
                          "(they hold line 4 [data-parallel] blocker)")
    assert (wrapper.rule.id, wrapper.category) == ("data-parallel", "decide")


def test_a_star_import_from_torch_cuda_is_reported():
    (finding,) = scan_source("from torch.cuda.amp import *\n").findings
    assert (finding.line, finding.rule.id, finding.category) == (1, "cuda-unknown", "decide")


def _s_source(path: str) -> str:
    return subprocess.run(["git", "-C", str(S_REPO), "show", f"HEAD:{path}"], capture_output=True, text=True,
                          check=True).stdout


def _resolve(dotted: str):
    if dotted.startswith("torch.distributed."):
        importlib.import_module("torch.distributed")  # a submodule `import torch` leaves out
    obj = {"torch": torch}[dotted.split(".")[0]]
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("rule", [r for r in load_rules() if r.target], ids=lambda r: r.id)
def test_each_target_exists_on_the_simulated_device_and_in_S(rule):
    """A rewrite's target is real on the simulated device (`torch.neuron.*`), and S defines it at the line the
    rule cites (or the rule says S lacks it)."""
    if rule.attribute:
        assert hasattr(torch.ones(1, device="neuron"), rule.target) and torch.ones(1, device="neuron").is_neuron
        return
    if rule.fix == "rename_last":  # ProfilerActivity.PrivateUse1; dist.Backend.NEURON, added by the device
        assert all(hasattr(_resolve(name.rsplit(".", 1)[0]), rule.target) for name in rule.names)
        return
    assert callable(_resolve(rule.target))
    if rule.s_line and S_REPO.exists():
        path, line = rule.s_line.split(":")
        text = _s_source(path).splitlines()[int(line) - 1]
        assert text.startswith(f"def {rule.target.rsplit('.', 1)[1]}("), (rule.id, text)


@pytest.mark.parametrize("rule", [r for r in load_rules() if r.s_lacks], ids=lambda r: r.id)
def test_rules_for_functions_S_lacks_say_so(rule):
    if not S_REPO.exists():
        pytest.skip("S is not mirrored on this machine")
    module = _s_source("torch_neuronx/neuron.py") + _s_source("torch_neuronx/memory.py")
    for name in rule.names:
        assert f"def {name.rsplit('.', 1)[1]}(" not in module
    assert "pre-release source has no" in rule.remedy


@pytest.mark.parametrize("rule", [r for r in load_rules() if (r.accelerator or "").startswith("torch.accelerator.")],
                         ids=lambda r: r.id)
def test_device_agnostic_forms_exist_in_this_torch(rule):
    assert callable(_resolve(rule.accelerator.split("(")[0]))


def test_rename_targets_behave_as_S_on_the_simulated_device():
    """What the rewritten calls return on the simulated device, as S's neuron.py / memory.py / streams.py do."""
    n = torch.neuron
    assert n.is_available() is True and isinstance(n.device_count(), int)  # S neuron.py:56-70
    assert n.get_device_name(0) == "neuron:0"  # S neuron.py:36-53: the device string, not a hardware name
    with n.device(1):  # S neuron.py:193
        assert n.current_device() == 1
    with pytest.raises(ValueError, match="Invalid device id"):  # S torch_neuronx set_device
        n.set_device(n.device_count())
    n.manual_seed(3)  # S neuron.py:104, :137
    assert n.initial_seed() == 3
    keep = torch.ones(256, device="neuron")
    assert n.max_memory_allocated() >= n.memory_allocated() >= keep.nbytes  # S memory.py:57,74
    del keep
    n.reset_peak_memory_stats()  # S memory.py:120: the peak drops to what is allocated now
    assert n.max_memory_allocated() == n.memory_allocated()
    keep = torch.ones(256, device="neuron")
    state = n.get_rng_state()  # S neuron.py:146, :170: a uint8 tensor (16-byte Philox seed and offset)
    torch.rand(3, device="neuron")
    n.set_rng_state(state)
    assert state.dtype == torch.uint8 and torch.equal(n.get_rng_state(), state)
    # Random ops are CPU fallbacks drawing from the host generator (S tests/device/test_rng_state.py): the
    # host's seed replays them, so the rule's remedy says to restore torch's generator too.
    torch.manual_seed(5)
    first = torch.rand(3, device="neuron").cpu()
    torch.manual_seed(5)
    assert torch.equal(torch.rand(3, device="neuron").cpu(), first)
    assert n.synchronize() is None and n.empty_cache() is None  # S neuron.py:249, :412
    assert isinstance(n.memory_summary(), str) and n.is_bf16_supported() is True  # S neuron.py:397, :443
    start, end = n.Event(enable_timing=True), n.Event(enable_timing=True)  # S streams.py Event
    start.record()
    keep.add_(1)
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    props = n.get_device_properties(0)  # S neuron.py:287 (an index, or a device string: S __init__.py:220-229)
    assert isinstance(props.name, str) and props.total_memory > 0
    assert n.get_device_properties("neuron:0").total_memory == props.total_memory
    side = n.Stream(device=0, priority=0)  # S neuron.py:210: keywords only, as the stream rule writes them
    with n.stream(side):  # S neuron.py:217
        assert n.current_stream() == side  # S neuron.py:228
    n.current_stream().wait_stream(side)
    n.set_stream(n.default_stream())  # S neuron.py:235, :242
    assert n.current_stream() == n.default_stream()


def test_unparsable_file_is_one_line_naming_it(tmp_path, capsys):
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\nx = torch.ones(2).cuda(\n")
    assert main(["port", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{bad}:" in err and "not valid Python" in err


def _python_says(text: str) -> SyntaxError:
    try:
        compile(text, "bad.py", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return exc
    raise AssertionError("compiles")


@pytest.mark.parametrize("text, where", [
    ("import torch\nx = 1\ndef f(:\n    pass\n", "3:7"),  # libcst's own location is 4:1
    ("import torch\nx = torch.ones(2).cuda(\n", "2:23"),  # libcst: 2:1, "error at 3:0"
    ('import torch\nprint "step", 1\n', "2:1"),  # Python 2: "Missing parentheses in call to 'print'"
])
def test_a_syntax_error_is_reported_where_and_as_python_reports_it(tmp_path, capsys, text, where):
    bad = tmp_path / "bad.py"
    bad.write_text(text)
    assert main(["port", str(bad)]) == 2
    said = _python_says(text)
    assert f"{said.lineno}:{said.offset}" == where
    assert capsys.readouterr().err.strip() == f"neuronkit port: error: {bad}:{where}: not valid Python ({said.msg})"


def test_a_file_python_compiles_but_libcst_cannot_parse_is_located_by_libcst(monkeypatch):
    """Syntax newer than libcst (a later Python's) compiles: the location and the message are then libcst's."""
    monkeypatch.setattr(scan, "compile", lambda *args, **kwargs: None, raising=False)  # as a newer Python would
    with pytest.raises(NeuronkitInputError) as caught:
        scan_source("import torch\nx = 1\ndef f(:\n    pass\n", "new.py")
    assert re.fullmatch(r"new\.py:4:1: Python compiles it but libcst cannot parse it \(parser error: .*\)",
                        str(caught.value))


def test_each_file_of_a_project_is_parsed_once(monkeypatch):
    parsed: Counter = Counter()
    parse = scan.cst.parse_module

    def counting(text, *args, **kwargs):
        parsed[text] += 1
        return parse(text, *args, **kwargs)

    monkeypatch.setattr(scan.cst, "parse_module", counting)
    project = scan.scan_project([ROOT / "tests" / "port" / "corpus" / "projects" / "package_project" / "train.py"])
    assert len(project.scans) > 1  # the script and the modules it imports
    assert [parsed[s.original] for s in project.scans] == [1] * len(project.scans)


def _port_json(tmp_path: Path, capsys, text: str) -> tuple[int, dict]:
    script = tmp_path / "train.py"
    script.write_text("import torch\n" + text)
    code = main(["port", str(script), "--json", "-"])
    return code, json.loads(capsys.readouterr().out)


def test_a_cuda_call_that_raises_without_cuda_blocks_where_neuron_reaches_it(tmp_path, capsys):
    """torch.cuda.get_device_capability() raises on Trainium and TorchNeuron has no counterpart (S's neuron.py
    defines none): called with no CUDA check on the way, the script cannot run there."""
    script = tmp_path / "train.py"
    script.write_text("import torch\nmajor, minor = torch.cuda.get_device_capability()\nuse_bf16 = major >= 8\n")
    assert main(["port", str(script)]) == 1
    captured = capsys.readouterr()
    assert f"{script}:2:16  BLOCKER  [get-device-capability]  torch.cuda.get_device_capability" in captured.out
    assert "here: raises here on Trainium, which has no CUDA" in captured.out
    assert captured.out.rstrip().endswith("(0 rewrite, 0 fixed by --write; 0 decide; 1 blocker) -> blocked")
    assert "blocked: blocker findings" in captured.err
    code, doc = _port_json(tmp_path, capsys, "free, total = torch.cuda.mem_get_info()\n")
    assert code == 1 and [(f["rule"], f["category"]) for f in doc["findings"]] == [("mem-get-info", "blocker")]


@pytest.mark.parametrize("guarded", [
    "if torch.cuda.is_available():\n    major, _ = torch.cuda.get_device_capability()\n",
    "major = torch.cuda.get_device_capability()[0] if torch.cuda.is_available() else 0\n",
    "bf16 = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8\n",
    "try:\n    free, total = torch.cuda.mem_get_info()\nexcept RuntimeError:\n    free = total = 0\n",
    "def free_memory():\n    if not torch.cuda.is_available():\n        return 0\n    return torch.cuda.mem_get_info()[0]\n",
], ids=["if", "if-else-expression", "and", "try", "early-return"])
def test_a_raising_cuda_call_a_cuda_check_keeps_neuron_from_stays_a_decision(tmp_path, capsys, guarded):
    code, doc = _port_json(tmp_path, capsys, guarded)
    assert code == 0 and doc["verdict"] == "ready"
    raising = [f for f in doc["findings"] if f["rule"] in ("get-device-capability", "mem-get-info")]
    assert [f["category"] for f in raising] == ["decide"]


def test_get_device_properties_is_torch_neurons_unless_the_script_reads_what_it_lacks(tmp_path, capsys):
    """S torch_neuronx/neuron.py:287 defines get_device_properties; its properties bind name and total_memory
    only (S csrc/core/NeuronBindings.cpp:550-552)."""
    code, doc = _port_json(tmp_path, capsys, "props = torch.cuda.get_device_properties(0)\n"
                                             "print(props.name, torch.cuda.get_device_properties(0).total_memory)\n")
    assert code == 0 and doc["verdict"] == "ready"
    assert [(f["rule"], f["category"], f["fixed_by_write"]) for f in doc["findings"]] == [
        ("get-device-properties", "rewrite", True)] * 2
    assert main(["port", str(tmp_path / "train.py"), "--diff"]) == 0
    assert "+props = torch.neuron.get_device_properties(0)" in capsys.readouterr().out
    code, doc = _port_json(tmp_path, capsys, "props = torch.cuda.get_device_properties(0)\n"
                                             "print(props.multi_processor_count)\n")
    (finding,) = doc["findings"]
    assert code == 1 and (finding["category"], finding["fixed_by_write"]) == ("blocker", False)
    assert finding["note"].startswith("reads .multi_processor_count of the result, which TorchNeuron's lacks")
    # behind a CUDA check the call stays a decision, and the check is not rewritten to run it on neuron
    code, doc = _port_json(tmp_path, capsys, "if torch.cuda.is_available():\n"
                                             "    print(torch.cuda.get_device_properties(0).major)\n")
    assert code == 0 and [(f["rule"], f["category"]) for f in doc["findings"]] == [
        ("is-available", "decide"), ("get-device-properties", "decide")]


def test_bad_input_exits_2(tmp_path, capsys):
    assert main(["port", str(tmp_path / "missing.py")]) == 2
    assert main(["port", str(CORPUS / "basics.py"), "--", "--lr", "1"]) == 2  # script arguments without --run
    assert main(["port", str(CORPUS), "--run"]) == 2  # --run takes one script
    assert main(["port", str(CORPUS / "basics.py"), "--run", "--steps", "0"]) == 2
    assert main(["port", str(CORPUS / "basics.py"), "--run", "--timeout", "0"]) == 2
    assert main(["port", str(CORPUS / "basics.py"), "--run", "--timeout", "-5"]) == 2
    assert all(line.startswith("neuronkit port: error:") for line in capsys.readouterr().err.splitlines())


def _unparsable_folder(folder: Path) -> dict[str, str]:
    """A folder as a real repository holds it: a script that ports, a Python 2 leftover, a broken file."""
    (folder / "legacy").mkdir(parents=True)
    (folder / "train.py").write_text((CORPUS / "basics.py").read_text())
    (folder / "legacy" / "old_train.py").write_text('import torch\nprint "loss", 1\nx = torch.ones(1).cuda()\n')
    (folder / "broken.py").write_text("import torch\nx = 1\ndef f(:\n    pass\n")
    said = _python_says('import torch\nprint "loss", 1\n').msg
    return {"broken.py": f"{folder / 'broken.py'}:3:7: not valid Python (invalid syntax), not scanned",
            "old_train.py": f"{folder / 'legacy' / 'old_train.py'}:2:1: not valid Python ({said}), not scanned"}


def test_a_file_that_is_not_python_in_a_folder_is_listed_and_the_others_are_scanned(tmp_path, capsys):
    folder = tmp_path / "repo"
    lines = _unparsable_folder(folder)
    assert main(["port", str(folder)]) == 0  # neither file is one a script imports: nothing blocks
    out = capsys.readouterr().out.splitlines()
    assert f"{folder / 'train.py'}:16:1  REWRITE (fixed by --write)  [set-device]  torch.cuda.set_device" in out
    assert lines["broken.py"] in out and lines["old_train.py"] in out
    assert re.fullmatch(r"1 file: \d+ findings \(.*\); 2 files not scanned -> ready", out[-1])
    assert main(["port", str(folder), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["files"] == [str(folder / "train.py")] and doc["verdict"] == "ready" and doc["findings"]
    assert [(n["path"], n["line"], n["col"], n["imported_by"], n["breaks_script"]) for n in doc["not_scanned"]] == [
        (str(folder / "broken.py"), 3, 7, None, False), (str(folder / "legacy" / "old_train.py"), 2, 1, None, False)]
    assert main(["port", str(folder), "--diff", "--write", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[:2] == [lines["broken.py"], lines["old_train.py"]] and "2 files not scanned -> ready" in err[2]
    assert f"no rewritten copy of {folder / 'broken.py'}: not scanned" in err
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["train.py"]  # a folder's copy, though of one file


def test_a_file_that_is_not_utf8_is_listed_as_python_reads_it(tmp_path, capsys):
    """Latin-1 source: with a coding declaration Python runs it (neuronkit reads UTF-8 only), without one Python
    cannot read it either; both are listed and the folder's other file is scanned."""
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "train.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    (folder / "declared.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\nname = 'caf\xe9'\n")
    (folder / "undeclared.py").write_bytes(b"import torch\nname = 'caf\xe9'\n")
    assert main(["port", str(folder), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["files"] == [str(folder / "train.py")] and doc["counts"]["rewrite"] == 1
    declared, undeclared = doc["not_scanned"]
    assert (declared["line"], declared["col"], declared["valid_python"]) == (3, 12, True)
    assert declared["reason"] == "not UTF-8 text (neuronkit reads UTF-8 source only)"
    assert (undeclared["line"], undeclared["valid_python"]) == (2, False)
    assert undeclared["reason"].startswith("not valid Python (") and "utf-8" in undeclared["reason"]


def test_a_module_the_script_imports_that_is_not_python_blocks_and_the_rest_is_scanned(tmp_path, capsys):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "train.py").write_text("import torch\nfrom model import Net\nfrom data import batches\n"
                                      "net = Net().cuda()\n")
    (project / "model.py").write_text("import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
                                      "        print x.shape\n        return x\n")
    (project / "data.py").write_text("import torch\ndef batches():\n    yield torch.ones(2, device='cuda')\n")
    (project / "stray.py").write_text("print 'not imported'\n")  # beside the script, not imported: not read
    assert main(["port", str(project / "train.py")]) == 1
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert f"{project / 'data.py'}:3:32  REWRITE (fixed by --write)  [device-string]  'cuda'" in out  # scanned
    said = _python_says("def f(x):\n    print x.shape\n").msg
    assert f"{project / 'model.py'}:4:9: not valid Python ({said}), not scanned (imported by {project / 'train.py'}: " \
           "the import raises SyntaxError, so the script cannot run as is)" in out
    assert re.fullmatch(r"2 files: 2 findings \(.*\); 1 file not scanned \(1 imported by the script and not valid "
                        r"Python\) -> blocked", out[-1])
    assert captured.err.strip() == "neuronkit port: blocked: the script imports a file that is not valid Python " \
                                   "(see above)"
    assert main(["port", str(project / "train.py"), "--json", "-"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "blocked" and doc["counts"]["blocker"] == 0
    assert [(n["path"], n["imported_by"], n["breaks_script"]) for n in doc["not_scanned"]] == [
        (str(project / "model.py"), str(project / "train.py"), True)]


def test_a_directory_with_blockers_exits_1_and_lists_them(tmp_path, capsys):
    folder = tmp_path / "scripts"
    (folder / "sub").mkdir(parents=True)
    (folder / "libraries.py").write_text((CORPUS / "libraries.py").read_text())
    (folder / "sub" / "basics.py").write_text((CORPUS / "basics.py").read_text())
    assert main(["port", str(folder)]) == 1
    out = capsys.readouterr().out
    assert f"{folder / 'libraries.py'}:9:24  BLOCKER  [flash-attn]  flash_attn_func" in out
    assert f"{folder / 'sub' / 'basics.py'}:8:" in out  # every *.py under the folder
    assert re.search(r"^2 files: \d+ findings .* -> blocked$", out, re.M)


def test_ready_script_exits_0_with_remedy_source_and_device_agnostic_form(capsys):
    assert main(["port", str(CORPUS / "basics.py")]) == 0
    out = capsys.readouterr().out
    assert "REWRITE (fixed by --write)  [synchronize]  torch.cuda.synchronize" in out
    assert ("source: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/torch-neuron-module.html"
            in out and "device-agnostic: torch.accelerator.synchronize()" in out)


def test_a_rewrite_left_by_hand_is_counted_in_the_verdict_and_does_not_block(tmp_path, capsys):
    """Only blockers block (exit 1); a rewrite `--write` cannot make (a generator on a device named at run
    time) is work left, so the summary says how much, and the exit status stays 0."""
    script = tmp_path / "train.py"
    script.write_text("import torch\ndevice = torch.device('cuda')\ng = torch.Generator(device=device)\n")
    assert main(["port", str(script)]) == 0
    out = capsys.readouterr().out
    assert "REWRITE (by hand)  [generator-device]  device=device" in out
    assert out.rstrip().endswith("(2 rewrite, 1 fixed by --write; 0 decide; 0 blockers) -> ready after 1 change by hand")
    assert main(["port", str(CORPUS / "basics.py")]) == 0
    assert capsys.readouterr().out.rstrip().endswith("0 blockers) -> ready")


def test_json_lists_each_finding_with_location_category_and_source(capsys):
    assert main(["port", str(CORPUS / "amp.py"), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "ready" and doc["counts"] == {"rewrite": 10, "decide": 0, "blocker": 0,
                                                           "fixed_by_write": 10}
    first = doc["findings"][0]
    assert {k: first[k] for k in ("line", "col", "category", "rule", "fixed_by_write")} == {
        "line": 3, "col": 28, "category": "rewrite", "rule": "grad-scaler", "fixed_by_write": True}
    assert first["source"] and first["remedy"] and "run" not in doc


def test_diff_and_write_leave_the_original_alone(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(EXAMPLE.read_text())
    before = script.read_text()
    assert main(["port", str(script), "--diff"]) == 0
    diff = capsys.readouterr().out
    assert diff.startswith(f"--- {script}\n+++ {script} (rewritten)\n")
    assert "\n-        torch.cuda.synchronize()\n" in diff and "\n+        torch.neuron.synchronize()\n" in diff
    out = tmp_path / "ported.py"
    assert main(["port", str(script), "--write", str(out)]) == 0
    assert script.read_text() == before and "torch.cuda.synchronize" not in out.read_text()
    assert main(["port", str(script), "--write", str(script)]) == 2
    assert script.read_text() == before


def test_write_mirrors_a_directory(tmp_path):
    out = tmp_path / "ported"
    assert main(["port", str(CORPUS / "basics.py"), str(CORPUS / "amp.py"), "--write", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["amp.py", "basics.py"]


# --- --run ------------------------------------------------------------------------------------------------------
# The command runs in this process; the rewritten script runs in the child it starts (its output reaches capfd).

@pytest.mark.subprocess
def test_the_example_runs_n_steps_on_two_simulated_cores(tmp_path, capfd, monkeypatch):
    """Under torchrun each rank holds its own core. One process: notebook 09 runs the example so
    (tests/notebooks/test_notebook_09.py), with the same summary."""
    monkeypatch.chdir(tmp_path)
    assert main(["port", str(EXAMPLE), "--run", "--steps", "2", "--nproc", "2", "--", "--model", str(TINY_QWEN3),
                 "--steps", "50", "--seq-len", "8"]) == 0
    assert_ran_the_example(capfd.readouterr().out, nproc=2)


def assert_ran_the_example(out: str, nproc: int) -> None:
    """What `neuronkit port --run` (or notebook 09's `run_summary`) printed for 2 optimizer steps of the
    example on `nproc` processes: the steps, peak memory of each rank's core, and NEFF compiles."""
    assert f"{nproc} process{'es' * (nproc > 1)}: 2/2 optimizer steps" in out and "-> ok" in out
    assert re.search(r"peak memory: neuron:0 \d+\.\d\d MiB", out)
    assert ("neuron:1" in out) == (nproc == 2)  # under torchrun each rank holds its own core
    compiles, hits = map(int, re.search(r"NEFF compiles: (\d+) \(cache hits (\d+)\)", out).groups())
    assert compiles + hits > 0  # a warm persistent NEFF cache turns compiles into hits


_CRASHES = """import torch
x = torch.arange(6.0).to("cuda")
y = torch.cumprod(x, 0)
from flash_attn import flash_attn_func
"""


@pytest.mark.subprocess
def test_a_crash_gives_its_error_and_line_the_blocker_hit_and_where_ops_fell_back(tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", RANK_ENV["OMP_NUM_THREADS"])  # forked from the rank server (conftest)
    script = tmp_path / "crash.py"
    script.write_text(_CRASHES)
    assert main(["port", str(script), "--run"]) == 1
    out = capfd.readouterr().out
    assert f"error: {script}:4: ModuleNotFoundError: No module named 'flash_attn'" in out
    assert "blocker hit: line 4 [flash-attn] flash_attn_func" in out
    assert "fell back to CPU: aten::cumprod.out (line 3)" in out  # the overload S's fallback names


def test_the_rules_page_is_up_to_date_and_every_source_it_names_exists():
    """docs/port.md is generated from the rule tables (tests/port/port_rules_page.py), and every `docs/PAGE#anchor`
    a rule shows as its source is a heading of that page."""
    assert port_rules_page.PAGE.read_text() == port_rules_page.render(), "run tests/port/port_rules_page.py"
    for rule in load_rules():
        for source in rule.source.split("; "):
            assert PUBLIC_SOURCE.match(source), (rule.id, source)
            if source.startswith("docs/"):
                page, anchor = source.split("#")
                assert anchor in port_rules_page.anchors(ROOT / page), (rule.id, source)
