"""neuronkit.audit: every category is found at the module that caused it, clean models stay clean,
weightless audits of 8B configs are cheap, and the CLI's exit codes say what happened."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch import nn

import neuronkit.cli
from neuronkit import inputs, models
from neuronkit.evidence import AuditFinding, AuditSummary, OpUse
from neuronkit.op_audit import AuditReport, audit
from neuronkit.errors import NeuronkitInputError
from neuronkit.policy import load_policy

LLAMA_8B = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
    "max_position_embeddings": 8192,
}
PATH = "stage.block"  # where every category case below puts the module under test


class Fn(nn.Module):
    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class Stage(nn.Module):
    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, x):
        return self.block(x)


class Net(nn.Module):
    """Wraps a module two levels down, so its ops must be attributed to `stage.block`."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.stage = Stage(block)

    def forward(self, x):
        return self.stage(x)


class MaskedAttention(nn.Module):
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.causal = causal
        self.register_buffer("mask", torch.randn(1, 2, 4, 4))

    def forward(self, q):
        if self.causal:
            return F.scaled_dot_product_attention(q, q, q, is_causal=True)
        return F.scaled_dot_product_attention(q, q, q, attn_mask=self.mask)


def forward_ad(x):
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.ones_like(x))
        return fwAD.unpack_dual(dual.sin()).tangent


def nested(x):
    return (torch.nested.nested_tensor([x[0, :2], x[0, :3]]) * 2).to_padded_tensor(0.0)


def per_channel(x):
    return torch.quantize_per_channel(x, torch.ones(2), torch.zeros(2, dtype=torch.long), 0, torch.quint8)


# (category, module, inputs, backward, op carrying the finding)
CASES = [
    ("sparse", lambda: nn.Embedding(10, 4, sparse=True), lambda: torch.tensor([[1, 2, 3]]), True,
     "aten::_sparse_coo_tensor_with_dims_and_tensors"),
    ("nested_tensor", lambda: Fn(nested), lambda: torch.randn(1, 4), False, "aten::_nested_tensor_from_tensor_list"),
    ("forward_ad", lambda: Fn(forward_ad), lambda: torch.randn(3), False, "aten::_make_dual"),
    ("sparse_embedding", lambda: nn.Embedding(10, 4, sparse=True), lambda: torch.tensor([[1, 2, 3]]), False,
     "aten::embedding"),
    ("per_channel_quant", lambda: Fn(per_channel), lambda: torch.randn(2, 3), False, "aten::quantize_per_channel"),
    ("neg_conj_view", lambda: Fn(lambda x: torch._neg_view(x) + 1), lambda: torch.randn(3), False,
     "aten::_neg_view"),
    ("signal_window", lambda: Fn(lambda x: x * torch.hann_window(8)), lambda: torch.randn(8), False,
     "aten::hann_window"),
    ("upsample_bilinear_bicubic", lambda: Fn(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear")),
     lambda: torch.randn(1, 1, 4, 4), False, "aten::upsample_bilinear2d"),
    ("upsample_bilinear_bicubic", lambda: Fn(lambda x: F.interpolate(x, scale_factor=2, mode="bicubic")),
     lambda: torch.randn(1, 1, 4, 4), False, "aten::upsample_bicubic2d"),
    ("dynamic_shape", lambda: Fn(lambda x: torch.nonzero(x > 0)), lambda: torch.randn(8), False, "aten::nonzero"),
    ("dynamic_shape", lambda: Fn(lambda x: x.repeat_interleave(torch.tensor([1, 2]), dim=0)),
     lambda: torch.randn(2, 3), False, "aten::repeat_interleave.Tensor"),
    ("fused_rnn", lambda: nn.LSTM(4, 4, batch_first=True), lambda: torch.randn(1, 3, 4), True, "aten::lstm"),
    ("fused_rnn", lambda: nn.GRU(4, 4), lambda: torch.randn(3, 1, 4), False, "aten::gru"),
    ("float64_emulated", lambda: nn.Linear(4, 4).double(), lambda: torch.randn(2, 4, dtype=torch.float64), False,
     "aten::addmm"),
    ("int64_emulated", lambda: Fn(lambda x: (x * 3 + 1).cumsum(0)), lambda: torch.arange(6), False, "aten::cumsum"),
    ("complex_dtype", lambda: Fn(lambda x: torch.view_as_complex(x) * 2), lambda: torch.randn(3, 2), False,
     "aten::mul"),
    ("cpu_fallback", lambda: Fn(lambda x: torch.cumprod(x, 0)), lambda: torch.randn(8), False, "aten::cumprod.out"),
    ("cpu_fallback", lambda: Fn(lambda x: torch.fft.rfft(x).abs()), lambda: torch.randn(8), False, "aten::_fft_r2c"),
]


@pytest.mark.filterwarnings("ignore::UserWarning")  # nested tensors and quantized dtypes warn of deprecation
@pytest.mark.filterwarnings("ignore:.*torch.jit.script:DeprecationWarning")  # forward AD's own decompositions
@pytest.mark.parametrize("category, block, inputs, backward, op", CASES,
                         ids=[f"{c[0]}-{c[4].split('::')[1]}" for c in CASES])
def test_each_category_is_found_at_its_module(category, block, inputs, backward, op):
    report = audit(Net(block()), (inputs(),), backward=backward)
    found = [f for f in report.findings if f.category == category and f.op == op]
    assert found, f"no {category} finding on {op}: {[(f.category, f.op) for f in report.findings]}"
    finding = found[0]
    assert finding.module_paths == [PATH]
    policy = load_policy()
    assert finding.severity == policy.severity[category]
    assert finding.remedy == policy.remedies[category] and finding.message
    row = report.op(op)
    assert row is not None and PATH in row.module_paths
    if policy.severity[category] == "blocker":
        assert row.classification == "blocked"
        assert OpUse(op, category, finding.calls, [PATH]) in report.summary.blockers


def test_repeat_interleave_by_a_number_is_a_static_shape():
    """S: int repeats (repeat_interleave.self_int) decompose to unsqueeze, expand, clone and view, a static shape
    (python_ops/torch_mlir/ops/tensor_ops.py:148-152); only a tensor of repeats sizes the output from its values.
    GPT-J's rotary embedding calls torch.repeat_interleave(sin, 2, 3)."""
    report = audit(Net(Fn(lambda x: torch.repeat_interleave(x, 2, 1) + x.repeat_interleave(2, dim=1))),
                   (torch.randn(2, 3),))
    assert report.findings == [] and {r.op for r in report.ops} >= {"aten::expand", "aten::clone"}


@pytest.mark.parametrize("causal", [True, False], ids=["is_causal", "additive mask"])
def test_4d_sdpa_is_the_devices_fused_kernel_without_a_finding(causal):
    """S lowers 4-D SDPA with or without a mask (csrc/aten/SdpBackendSelection.cpp:35-47)."""
    report = audit(Net(MaskedAttention(causal=causal)), (torch.randn(1, 2, 4, 8),))
    assert [r.op for r in report.ops] == ["aten::_scaled_dot_product_fused_attention_overrideable"]
    assert report.ops[0].classification == "native" and report.ops[0].module_paths == [PATH]
    assert report.findings == []


def test_the_seed_mlp_has_nothing_to_plan_for():
    model = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64))
    for backward in (False, True):
        report = audit(model, (torch.randn(8, 64),), backward=backward)
        assert not [f for f in report.findings if f.severity in ("blocker", "warn")]
        assert report.summary.support_pct_ops == report.summary.support_pct_calls == 100.0
    paths = {r.op: r.module_paths for r in report.ops}
    assert paths["aten::addmm"] == ["0"] and paths["aten::gelu"] == ["1"]
    assert paths["aten::gelu_backward"] == ["1"] and paths["aten::native_layer_norm_backward"] == ["2"]


def test_training_audit_attributes_phases_and_leaves_the_model_as_it_was():
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    before = [p.detach().clone() for p in model.parameters()]
    report = audit(model, (torch.randn(4, 8),), optimizer_step=True)
    assert report.model.phases == ["forward", "backward", "optimizer_step"]
    paths = {r.op: r.module_paths for r in report.ops}
    assert paths["aten::_fused_adamw_"] == ["<optimizer>"]
    assert paths["aten::ones_like"] == ["<backward>"]  # the loss seed: no module made it
    assert paths["aten::native_dropout"] == ["1"]  # the device's fused dropout, not CPU's bernoulli_
    assert set(paths["aten::mm"]) == {"0", "2"}  # weight gradients, attributed to their layers
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert all(p.grad is None for p in model.parameters()) and model.training


def test_tiny_qwen3_audit_is_stable_and_fully_native(capsys):
    warn_always = torch._C._get_warnAlways()
    torch._C._set_warnAlways(True)  # every C++ warning, not only the process's first of each kind
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first, second = audit("tiny-qwen3"), audit("tiny-qwen3")
    finally:
        torch._C._set_warnAlways(warn_always)
    # a structured op's composite kernel (pow, mul, ...) never runs on fake storage: no data-pointer warning
    assert not [w for w in caught if "data pointer of FakeTensor" in str(w.message)]
    assert first.op("aten::pow").calls == 9  # its out= overload, the call the device receives
    assert first.op("aten::empty").calls >= 9  # after the kernel allocates its output on the device
    assert first.summary == second.summary
    assert first.ops == second.ops and first.findings == second.findings
    assert first.model.weightless and first.summary.by_category == {"native": first.summary.distinct_ops}
    sdpa = first.op("aten::_scaled_dot_product_fused_attention_overrideable")
    assert sdpa.module_paths == ["model.layers.0.self_attn", "model.layers.1.self_attn"]
    with capsys.disabled():
        print(f"\ntiny-qwen3 audit: {first.summary.by_category}, findings {first.summary.findings}")


def test_a_python_number_passed_on_as_a_wrapped_tensor_is_recorded():
    # remainder.Scalar's composite calls remainder.Tensor with the number wrapped, which a dispatch mode sees
    # as the number again (CANINE hashes code points with `%`): recorded, not a schema error
    class Hashing(nn.Module):
        def forward(self, ids):
            return (ids % 7) + (ids & 1) + (1 - ids)

    report = audit(Hashing(), (torch.arange(8),))
    assert report.op("aten::remainder").calls == 1 and report.op("aten::bitwise_and").calls == 1


def test_weightless_and_real_audits_of_tiny_qwen3_agree():
    weightless = audit("tiny-qwen3")
    real = audit(models.load_model("tiny-qwen3"), {"input_ids": inputs.example_inputs(
        models.load_config("tiny-qwen3"), models.load_tokenizer("tiny-qwen3"))["input_ids"]})
    assert {(r.op, r.calls, r.category) for r in weightless.ops} == {(r.op, r.calls, r.category) for r in real.ops}


def test_generate_and_training_phases_on_the_bundled_model():
    report = audit("tiny-qwen3", generate=True, max_new_tokens=2)
    assert report.model.weights == "random" and report.model.phases == ["forward", "generate"]
    assert any("<generate>" in r.module_paths for r in report.ops)
    training = audit("tiny-bert", optimizer_step=True)
    assert training.model.phases == ["forward", "backward", "optimizer_step"]
    assert training.op("aten::embedding_dense_backward").module_paths[0].startswith("bert.embeddings.")


def test_weightless_8b_audit_is_cheap(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    report = audit(tmp_path)
    elapsed = time.perf_counter() - start
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert elapsed < 60 and peak_after - peak_before < 2 * 10**9
    assert report.model.weightless and report.model.num_parameters == 8_030_261_248
    assert report.summary.total_calls > 1000
    sdpa = report.op("aten::_scaled_dot_product_fused_attention_overrideable")
    assert sdpa.calls == 32 and sdpa.shapes[0][0] == [1, 32, 16, 128]


def test_json_document_follows_the_schema(tmp_path):
    report = audit(Net(Fn(lambda x: torch.cumprod(x, 0))), (torch.randn(4),))
    data = json.loads(report.to_json(tmp_path / "audit.json"))
    assert json.loads((tmp_path / "audit.json").read_text()) == data
    assert data["schema_version"] == 3
    assert set(data) == {"schema_version", "model", "versions", "summary", "ops", "findings", "severities", "remedies",
                         "apis"}
    assert set(data["model"]) == {"name", "class", "architecture", "model_type", "num_parameters", "dtype",
                                  "weightless", "weights", "inputs", "phases", "retraced"}
    assert set(data["versions"]) >= {"torch", "transformers", "neuronkit"}
    assert set(data["summary"]) == {"distinct_ops", "total_calls", "support_pct_ops", "support_pct_calls",
                                    "by_category", "by_classification", "findings", "fallbacks", "blockers", "nki_ops"}
    for row in data["ops"]:
        assert set(row) == {"op", "calls", "classification", "category", "dtypes", "shapes", "module_paths",
                            "nki_est_us", "nki_engine_us"}
    for finding in data["findings"]:
        assert set(finding) == {"category", "severity", "op", "calls", "module_paths", "message", "remedy"}
        assert finding["category"] in load_policy().categories
        assert data["severities"][finding["category"]] == finding["severity"]
    assert data["summary"]["fallbacks"] == [{"op": "aten::cumprod.out", "category": None, "calls": 1,
                                             "module_paths": [PATH]}]
    assert data["model"]["class"] == "Net"
    assert AuditReport.from_dict(data) == report  # the one load at the JSON boundary gives the same records
    assert isinstance(report.findings[0], AuditFinding) and isinstance(report.summary, AuditSummary)


def test_bad_audit_input():
    with pytest.raises(NeuronkitInputError, match="cannot audit a int"):
        audit(42)
    with pytest.raises(NeuronkitInputError, match="example_inputs are needed"):
        audit(nn.Linear(2, 2))
    with pytest.raises(NeuronkitInputError, match="cannot run weightless"):
        audit("tiny-qwen3", generate=True, weightless=True)
    with pytest.raises(NeuronkitInputError, match="needs a generative model"):
        audit("tiny-bert", generate=True)


# -- CLI ------------------------------------------------------------------------------------------

@pytest.fixture
def main(monkeypatch):
    """The central `neuronkit` entry point (its error handling included) with only the audit subcommand
    registered, so these tests do not depend on the other subcommands' modules importing."""
    monkeypatch.setattr(neuronkit.cli, "SUBCOMMANDS", {"audit": neuronkit.cli.SUBCOMMANDS["audit"]})
    return neuronkit.cli.main


def test_cli_prints_a_summary_and_writes_json(main, tmp_path, capsys):
    out = tmp_path / "audit.json"
    assert main(["audit", "tiny-qwen3", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "native on Neuron" in text and "int64_emulated" in text and "remedy:" in text
    assert json.loads(out.read_text())["model"]["name"] == "tiny-qwen3"


def test_cli_fail_on_exits_1_only_for_present_categories(main, capsys):
    assert main(["audit", "tiny-qwen3", "--fail-on", "mha_mask,cpu_fallback"]) == 0
    assert main(["audit", "tiny-qwen3", "--fail-on", "int64_emulated"]) == 1
    assert "int64_emulated" in capsys.readouterr().err


@pytest.mark.parametrize("argv, expected", [
    (["audit", "tiny-qwen3", "--fail-on", "sdpa_mask"], "unknown --fail-on category sdpa_mask"),
    (["audit", "/no/such/model"], "not found"),
])
def test_cli_bad_input_exits_2_with_one_line(main, argv, expected, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err


def test_cli_broken_config_exits_2_with_one_line(main, tmp_path, capsys):
    (tmp_path / "config.json").write_text("{broken")
    assert main(["audit", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("neuronkit audit: error: ") and "not valid JSON" in err and "\n" not in err


@pytest.mark.subprocess
def test_python_m_neuronkit_cli_audit_bad_input_exits_2():
    """The console entry itself: its exit status and last line. An argument refused before the audit's runner
    loads (transformers, Dynamo); a broken config's line is test_cli_broken_config_exits_2_with_one_line's."""
    proc = subprocess.run([sys.executable, "-m", "neuronkit.cli", "audit", "tiny-qwen3", "--fail-on", "sdpa_mask"],
                          capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("neuronkit audit: error: unknown --fail-on category")
