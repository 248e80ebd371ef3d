"""Staged parity checks (`neuronkit.checks`), shape buckets and the `neuronkit check` CLI."""

from __future__ import annotations

import itertools
import json
import random

import pytest
import torch

import neuronkit.cli
from neuronkit import models
from neuronkit.graph_compile import suggest_buckets
from neuronkit.units import format_duration
from neuronkit.graph_compile.buckets import sample_lengths
from neuronkit.checks import CHECK_STAGES as STAGES, Reference, check
from neuronkit.errors import NeuronkitInputError
from neuronkit.models import load_tokenizer
from neuronkit.pipeline.record import StageResult
from neuronkit.pipeline.stage import STEP


from conftest import TwoLayerMLP as MLP  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class DataDependentBranch(MLP):
    """`.item()` decides the branch: Dynamo cannot keep both halves in one graph."""

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if h.sum().item() > 0:
            h = h * 2
        return self.fc2(h)


class HostOnly(MLP):
    """Runs on the CPU, raises on the device: the eager stage fails."""

    def forward(self, x):
        if x.device.type == "neuron":
            raise RuntimeError("HostOnly cannot run on neuron")
        return super().forward(x)


def mlp() -> MLP:
    torch.manual_seed(0)
    return MLP()


@pytest.fixture(scope="module")
def qwen3_report():
    torch._dynamo.reset()
    return check("tiny-qwen3", timing_runs=3)


def test_tiny_qwen3_passes_every_stage_with_evidence(qwen3_report):
    report = qwen3_report
    assert [s.stage for s in report.stages] == list(STAGES)
    assert report.ok, report.table()
    status = {s.stage: s.status for s in report.stages}
    assert status["cpu"] == status["generate"] == status["train"] == status["timing"] == "pass"
    eager = report.stage("eager").evidence  # each check stage's record is its typed evidence record
    assert all(row.ok for row in eager.parity.outputs) and eager.parity.top1_agreement == 1.0
    assert report.stage("generate").evidence.generate_identical is True
    train = report.stage("train").evidence
    assert len(train.cpu_losses) == len(train.neuron_losses) == 2 and train.ok
    compiled = report.stage("compile").evidence
    assert all(row.ok for row in compiled.parity.outputs) and compiled.training.ok
    assert compiled.graphs >= 1 and compiled.neffs >= 2 and compiled.compile_time_s > 0
    assert compiled.recompiles >= 1  # a shorter sequence is a new static shape
    assert compiled.buckets.compilations <= 4 < compiled.buckets.distinct_shapes
    timing = report.stage("timing").evidence
    assert timing.eager_step_ms > 0 and timing.compiled_train_step_ms > 0 and timing.runs == 3
    summary = report.stage("timing").summary
    assert f"first compiled call {format_duration(compiled.compile_time_s)}" in summary
    assert "host timings of the simulated device" in summary  # never read as Trainium's
    assert compiled.buckets.source == "the bundled sample prompts"  # no prompts given: said so
    # compile parity is held to the CPU stage's reference (a compile-only check runs no eager stage: below)
    assert compiled.training.loss_cpu == pytest.approx(report.stage("cpu").evidence.loss)


def test_report_is_json_of_stage_records(qwen3_report, tmp_path):
    data = json.loads(qwen3_report.to_json(tmp_path / "check.json"))
    assert data["model"] == "tiny-qwen3" and [s["stage"] for s in data["stages"]] == list(STAGES)
    assert json.loads((tmp_path / "check.json").read_text()) == data
    records = [StageResult.from_dict(s, STEP[s["stage"]].evidence) for s in data["stages"]]  # the one record type
    assert [r.status for r in records] == [s.status for s in qwen3_report.stages]
    assert records[0].evidence.outputs == qwen3_report.stage("cpu").evidence.outputs  # typed again
    assert "tiny-qwen3" in qwen3_report.table()


def test_a_saved_reference_replaces_the_cpu_run(qwen3_report, tmp_path):
    from neuronkit.inputs import example_inputs
    from neuronkit.pipeline import check as check_steps
    from neuronkit.pipeline.session import Session, forward_extras
    from neuronkit.stages.cpu_baseline.steps import cpu_reference
    from neuronkit.models import load_checkpoint, load_tokenizer

    model, _ = load_checkpoint("tiny-qwen3")
    inputs = example_inputs(model.config, load_tokenizer("tiny-qwen3"), 1, 16)
    computed = cpu_reference(model, inputs, **forward_extras(model))
    reference = Reference.load(computed.save(tmp_path / "reference.safetensors"))
    assert list(reference.outputs) == list(computed.outputs) and list(reference.inputs) == list(inputs)
    assert reference.loss == pytest.approx(qwen3_report.stage("cpu").evidence.loss)
    report = check_steps.check(Session.build("tiny-qwen3").using(reference=reference), ["eager"])
    cpu = report.stage("cpu")
    assert cpu.evidence.reused is True and "read from the CPU baseline" in cpu.summary
    assert cpu.evidence.forward_ms is None and [o.name for o in cpu.evidence.outputs] == list(computed.outputs)
    assert report.stage("eager").status == "pass"
    with pytest.raises(NeuronkitInputError, match="run the CPU baseline"):
        Reference.load(tmp_path / "missing.safetensors")


def test_encoder_skips_generate_with_the_reason():
    report = check("tiny-bert", stages=["cpu", "eager", "generate", "train"])
    status = {s.stage: s.status for s in report.stages}
    assert status["generate"] == "skipped"
    assert "BertForMaskedLM does not generate" in report.stage("generate").summary
    assert status["cpu"] == status["train"] == "pass" and status["eager"] in ("pass", "warn")
    assert report.ok


def test_graph_break_is_reported_with_reason_and_place():
    x = torch.randn(4, 8)
    report = check(DataDependentBranch(), x, stages=["compile"])
    stage = report.stage("compile")
    assert stage.status == "warn", stage.summary
    assert stage.evidence.graphs >= 2 and stage.evidence.graph_break_count >= 1
    (first, *_) = stage.evidence.graph_breaks
    assert "item()" in first.reason and "test_check.py" in first.where
    assert all(row.ok for row in stage.evidence.parity.outputs)


def test_a_crashing_stage_is_an_error_and_the_following_ones_are_reported():
    report = check(HostOnly(), torch.randn(4, 8), timing_runs=1)
    status = {s.stage: s.status for s in report.stages}
    assert status == {"cpu": "pass", "eager": "error", "generate": "skipped", "train": "error",
                      "compile": "error", "timing": "skipped"}
    eager = report.stage("eager")
    assert "HostOnly cannot run on neuron" in eager.summary and "Traceback" in eager.error
    assert report.stage("timing").summary.startswith(
        "skipped: compile failed (error: RuntimeError: HostOnly cannot run on neuron")
    assert not report.ok and report.status == "error"
    json.loads(report.to_json())


class Branches(MLP):
    """`torch.cond`: a higher-order op the device's compiler cannot lower."""

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: self.fc2(torch.relu(self.fc1(t))), lambda t: self.fc2(self.fc1(t)),
                          (x,))


def test_a_compile_failure_names_its_cause_not_the_backend_object():
    stage = check(Branches(), torch.randn(4, 8), stages=["compile"]).stage("compile")
    assert stage.status == "error" and "Higher-order operation 'cond'" in stage.summary, stage.summary
    assert " object at 0x" not in stage.summary


class _DeviceScaledGrad(torch.autograd.Function):
    """Identity forward; the backward doubles the gradient on the device (the traced backward graph keeps it)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * 2 if grad.device.type == "neuron" else grad


class BackwardOffOnDevice(MLP):
    def forward(self, x):
        return self.fc2(_DeviceScaledGrad.apply(torch.relu(self.fc1(x))))


def test_a_compiled_training_step_off_the_cpu_says_by_how_much():
    """Outputs that match and a training step that does not: the failure gives the training step's errors,
    not the outputs' (which read as a pass)."""
    torch.manual_seed(0)
    stage = check(BackwardOffOnDevice(), torch.randn(4, 8), stages=["compile"]).stage("compile")
    assert stage.status == "fail" and stage.evidence.parity.outputs[0].ok, stage.summary
    assert stage.summary.startswith("compiled training step off the CPU reference (loss rel err "), stage.summary
    assert f"grad-norm rel err {stage.evidence.training.grad_norm_rel_err:.1e} (> 0.001)" in stage.summary


class FailsUnderAnyCompile(MLP):
    """Code that takes another path while Dynamo traces, and that path is broken (as transformers' DeepSeek-V2
    attention is for a config whose key/value heads differ from its query heads)."""

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if torch.compiler.is_compiling():
            h = h + torch.zeros(3)  # does not broadcast against (4, 16)
        return self.fc2(h)


def test_a_compile_that_fails_on_the_cpu_too_is_skipped_not_the_devices_error():
    stage = check(FailsUnderAnyCompile(), torch.randn(4, 8), stages=["compile"]).stage("compile")
    assert stage.status == "skipped", stage.summary
    assert stage.summary.startswith("torch.compile fails on the CPU too, so not because of the device: RuntimeError: ")
    assert "broadcast a dimension of length 3" in stage.summary, stage.summary  # the op's error, not Dynamo's wrapper


def test_bfloat16_runs_under_autocast_with_looser_tolerances():
    report = check(mlp(), torch.randn(4, 8), stages=["eager", "train"], dtype="bfloat16")
    eager = report.stage("eager")
    assert eager.status == "pass", eager.summary
    assert eager.evidence.autocast == "bfloat16"
    (row,) = eager.evidence.parity.outputs
    assert row.rtol > 1e-3 and row.max_abs_err < row.atol  # the bf16 bound; the CPU side rounds alike
    assert report.dtype == "bfloat16" and report.stage("train").status == "pass"


class Cancelling(torch.nn.Module):
    """Two large, nearly equal features and their difference: bfloat16 rounds each near 300 to a step of
    2, so the difference is mostly rounding; in float32 it is exact."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 2)
        self.fc2 = torch.nn.Linear(2, 1, bias=False)
        with torch.no_grad():
            w = torch.randn(1, 8, generator=torch.Generator().manual_seed(0))
            self.fc1.weight.copy_(torch.cat([w, w + 0.01]))
            self.fc1.bias.fill_(300.0)
            self.fc2.weight.copy_(torch.tensor([[1.0, -1.0]]))

    def forward(self, x):
        return self.fc2(self.fc1(x))


def test_a_bfloat16_check_holds_the_device_to_the_cpu_in_the_same_dtype():
    """What bfloat16 itself costs a model is no device difference: the CPU side runs under CPU autocast
    too (against float32 numbers this model's eager and training checks failed, rel err 1.0)."""
    model = Cancelling()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    from neuronkit.pipeline import check as check_steps
    from neuronkit.pipeline.config import DEFAULTS
    from neuronkit.pipeline.session import Session

    session = Session.build(model, torch.randn(4, 8, generator=torch.Generator().manual_seed(1)),
                            config=DEFAULTS.with_options(dtype="bfloat16"))
    report = check_steps.check(session.using(freeze=True), ["eager", "train"])
    assert report.status == "pass", report.table()
    train = report.stage("train").evidence
    assert train.cpu_autocast == "bfloat16" and train.max_loss_rel_err < 1e-3
    assert train.frozen == []  # freezing names a model's embeddings and head: this one has none
    # the training check trained the module itself and put it back
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.requires_grad and p.grad is None for p in model.parameters())


def test_a_frozen_training_check_says_what_it_held_fixed(zoo):
    report = check(str(zoo["llama"]), stages=["train"], layers=1, dtype="bfloat16", train_steps=1)
    train = report.stage("train")
    assert train.status == "pass", train.summary
    tied = models.load_config(zoo["llama"]).tie_word_embeddings  # a tied head is the embedding: named once
    assert train.evidence.frozen == ["model.embed_tokens.weight"] + ([] if tied else ["lm_head.weight"])
    assert "held fixed" in train.summary and report.model_slice.layers == 1


def test_recompiles_are_counted_for_a_second_shape_and_eager_is_not_rerun():
    report = check(mlp(), torch.randn(4, 8), stages=["compile"])
    assert [s.stage for s in report.stages] == ["cpu", "compile"]  # eager is not a prerequisite
    stage = report.stage("compile")
    assert stage.status == "pass" and "matches CPU" in stage.summary, stage.summary
    assert stage.evidence.recompiles == 1
    assert stage.evidence.recompile_shapes == [{"output": [4, 8]}, {"output": [8, 8]}]  # the batch varies


def test_unknown_stage_or_non_module_is_bad_input():
    with pytest.raises(NeuronkitInputError, match="unknown stage"):
        check(mlp(), torch.randn(2, 8), stages=["warp"])
    with pytest.raises(NeuronkitInputError, match="pass inputs="):
        check(mlp())


# ---------------------------------------------------------------------------------------------------
# Shape buckets.


def test_buckets_bound_compilations_with_least_padding():
    plan = suggest_buckets([3, 4, 4, 9, 10, 30], max_buckets=2)
    assert plan.distinct_shapes == 5
    assert plan.buckets == [10, 30] and plan.compilations == 2
    assert plan.padding_overhead == pytest.approx(100 * 20 / 60, abs=0.01)
    (pow2,) = plan.alternatives
    assert pow2.strategy == "pow2" and pow2.buckets == [4, 16, 32] and pow2.compilations == 3
    assert plan.counts == {10: 5, 30: 1} and plan.padded_tokens == 80 and plan.total_tokens == 60


def test_min_padding_buckets_are_optimal():
    rng = random.Random(0)
    for _ in range(100):
        lengths = [rng.randint(1, 40) for _ in range(rng.randint(1, 12))]
        k = rng.randint(1, 4)
        plan = suggest_buckets(lengths, max_buckets=k)
        distinct = sorted(set(lengths))
        candidates = (edges for r in range(1, k + 1) for edges in itertools.combinations(distinct, r)
                      if edges[-1] == distinct[-1])
        brute = min(sum(min(e for e in edges if e >= v) for v in lengths) for edges in candidates)
        assert plan.padded_tokens == brute
        assert plan.compilations <= k


def test_bucket_advice_from_the_sample_prompts():
    lengths = sample_lengths(load_tokenizer("tiny-qwen3"))
    assert len(lengths) == 60
    plan = suggest_buckets(lengths, max_buckets=4, multiple_of=8, max_length=512)
    assert plan.distinct_shapes > 20 and plan.compilations <= 4
    assert all(b % 8 == 0 for b in plan.buckets) and plan.buckets[-1] >= max(lengths)
    assert "distinct lengths" in plan.summary()


@pytest.mark.parametrize("lengths, kwargs, message", [
    ([], {}, "at least one"),
    ([3, 0], {}, "positive integers"),
    ([3], {"max_buckets": 0}, "max_buckets"),
    ([600], {"max_length": 512}, "exceeds max_length"),
])
def test_bad_bucket_input(lengths, kwargs, message):
    with pytest.raises(NeuronkitInputError, match=message):
        suggest_buckets(lengths, **kwargs)


# ---------------------------------------------------------------------------------------------------
# CLI.


@pytest.fixture
def main(monkeypatch):
    monkeypatch.setattr(neuronkit.cli, "SUBCOMMANDS", {"check": neuronkit.cli.SUBCOMMANDS["check"]})
    return neuronkit.cli.main


def test_cli_prints_the_table_and_writes_json(main, tmp_path, capsys):
    out = tmp_path / "check.json"
    assert main(["check", "tiny-bert", "--stages", "eager,generate", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "stage" in text and "SKIPPED" in text and "does not generate" in text
    assert [s["stage"] for s in json.loads(out.read_text())["stages"]] == ["cpu", "eager", "generate"]


def test_cli_exits_1_when_a_stage_raises(main, monkeypatch, capsys):
    from neuronkit.stages.eager import steps

    def broken(run, evidence):
        raise RuntimeError("injected")

    monkeypatch.setattr(steps, "run_eager", broken)
    assert main(["check", "tiny-bert", "--stages", "eager"]) == 1
    printed = capsys.readouterr()
    assert "ERROR" in printed.out and "RuntimeError: injected" in printed.out
    assert printed.err.strip() == "neuronkit check: eager raised; rerun with --debug for the traceback(s)"
    assert main(["check", "tiny-bert", "--stages", "eager", "--debug"]) == 1  # the stage's traceback, whole
    err = capsys.readouterr().err
    assert err.startswith("neuronkit check: eager raised:\nTraceback (most recent call last):"), err
    assert 'raise RuntimeError("injected")' in err and err.rstrip().endswith("RuntimeError: injected"), err


@pytest.mark.parametrize("argv, expected", [
    (["check", "tiny-bert", "--stages", "eager,warp"], "unknown stage"),
    (["check", "/no/such/model"], "not found"),
    (["check", "tiny-bert", "--seq-len", "0"], "seq_len"),
])
def test_cli_bad_input_exits_2(main, argv, expected, capsys):
    assert main(argv) == 2
    assert expected in capsys.readouterr().err


def test_a_left_padded_batch_fails_eager_and_names_the_masked_rows(main, tmp_path, capsys):
    """`neuronkit check` on a left-padded batch (S's attention makes a fully masked row NaN,
    torch_mlir/ops/scaled_dot_product_attention.py:67-72): the eager and generate stages fail naming the
    attention modules, the category and the remedy; the same batch padded on the right passes."""
    from safetensors.torch import save_file

    ids, mask = torch.tensor([[5, 6, 7, 8, 0, 0], [1, 2, 3, 4, 5, 6]]), torch.tensor([[1, 1, 1, 1, 0, 0], [1] * 6])
    save_file({"input_ids": ids, "attention_mask": mask}, str(tmp_path / "right.safetensors"))
    save_file({"input_ids": ids.roll(2, 1), "attention_mask": mask.roll(2, 1)}, str(tmp_path / "left.safetensors"))
    out = tmp_path / "left.json"
    assert main(["check", "tiny-qwen3", "--inputs", str(tmp_path / "left.safetensors"), "--stages", "eager,generate",
                 "--json", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "[sdpa_fully_masked_row]" in printed and "padding_side" in printed and "model.layers.0.self_attn" in printed
    assert printed.count("[sdpa_fully_masked_row]") == 2  # eager, and generate() on the first (padded) prompt
    eager = next(s for s in json.loads(out.read_text())["stages"] if s["stage"] == "eager")
    assert eager["evidence"]["fully_masked_attention"] == ["model.layers.0.self_attn", "model.layers.1.self_attn"]
    assert main(["check", "tiny-qwen3", "--inputs", str(tmp_path / "right.safetensors"), "--stages", "eager"]) == 0
    assert "sdpa_fully_masked_row" not in capsys.readouterr().out


def test_library_notices_are_summarised_after_the_result(main, tmp_path, capsys, monkeypatch):
    """transformers' own notices (Mamba's kernels falling back to their PyTorch reference, here) are kept
    back and summarised after the table in one line per library, so they do not read as neuronkit's
    findings; `--debug` leaves them to transformers' own handler, whole, as they come."""
    from transformers import MambaConfig
    from transformers.utils import logging as hf_logging

    MambaConfig(vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=1,
                architectures=["MambaForCausalLM"]).save_pretrained(tmp_path)
    import logging

    # every time, not once per process: another test in this worker may have built a Mamba before
    monkeypatch.setattr(logging.Logger, "warning_once", hf_logging.warning_once.__wrapped__)
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_warning()  # transformers' default (the zoo fixture's builder turns it down)
    try:
        assert main(["check", str(tmp_path), "--random-weights", "--stages", "cpu"]) == 0
        printed = capsys.readouterr()
        assert "cpu       PASS" in printed.out and "falling back" not in printed.out
        notes = printed.err.splitlines()
        assert notes[0].startswith("notes from the libraries this ran"), printed.err
        assert any(line.startswith("  transformers: ") and "falling back to its reference PyTorch" in line
                   for line in notes[1:]), printed.err
        assert main(["check", str(tmp_path), "--random-weights", "--stages", "cpu", "--debug"]) == 0
        assert "notes from the libraries" not in capsys.readouterr().err  # transformers' own handler printed them
    finally:
        hf_logging.set_verbosity(level)


def test_an_error_several_steps_meet_is_spelled_out_once():
    """A refused op in the model stops eager, generate, train and timing alike: the table gives its message
    (with its remedy, a paragraph) at the first step and points back to it after; other errors stay whole."""
    from neuronkit.pipeline.check import CheckReport
    from neuronkit.pipeline.record import StageResult

    refused = "ValueError: t must be divisible by 128: aten::_grouped_mm refused its inputs. Pad every group."
    report = CheckReport("moe", "float32", [
        StageResult("cpu", "pass", "2 output(s)"), StageResult("eager", "error", refused),
        StageResult("generate", "error", refused), StageResult("compile", "error", "RuntimeError: other"),
        StageResult("timing", "error", refused)])
    rows = report.table().splitlines()[-5:]
    assert rows[1].endswith(refused) and rows[2].endswith("the same error as eager")
    assert rows[3].endswith("RuntimeError: other") and rows[4].endswith("the same error as eager")
    assert [s.summary for s in report.stages].count(refused) == 3  # the JSON keeps every step's own message
    # the eager workbook stage's summary of its steps (its record, the report's verdict, run's progress line)
    assert report.verdict(["eager", "generate", "train"]) == (
        "error", f"eager: {refused.removesuffix('.')}; generate: the same error as eager")  # no ".;"
    skipped = StageResult("timing", "skipped", f"skipped: eager failed (error: {refused}); timing needs it")
    rows = CheckReport("moe", "float32", [*report.stages[:3], skipped]).table().splitlines()
    assert rows[-1].endswith("skipped: eager failed (error: the same error as eager); timing needs it")


def test_torchs_own_error_log_is_a_library_note_not_a_traceback(tmp_path, capsys, monkeypatch):
    """A model's shape error met on fake tensors (xLSTM's step kernel, whose audit trace fails on any device) is
    logged by torch's fake-tensor module with its traceback, through torch's own handlers: the command's
    output is its one line (or its result), never that traceback."""
    from transformers import xLSTMConfig

    xLSTMConfig(vocab_size=128, hidden_size=64, embedding_dim=64, num_hidden_layers=1, num_blocks=1, num_heads=4,
                qk_dim_factor=0.5, v_dim_factor=1.0, chunk_size=16,
                architectures=["xLSTMForCausalLM"]).save_pretrained(tmp_path)
    import logging
    import sys

    for handler in logging.getLogger("torch._subclasses.fake_tensor").handlers:  # torch's, made at its import:
        if type(handler) is logging.StreamHandler:  # writing where a command's stderr goes (not pytest's)
            monkeypatch.setattr(handler, "stream", sys.stderr)
    neuronkit.cli.main(["audit", str(tmp_path / "config.json")])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "failed while attempting to run meta" not in err, err


def test_a_stage_skipped_after_a_skipped_one_says_skipped_once():
    """`timing` needs `compile`, which was skipped because `cpu` failed: its reason quotes compile's reason
    once, not `compile was skipped (skipped: skipped: cpu failed ...)`."""
    from neuronkit.pipeline.record import StageResult, skipped, unmet

    compile_record = skipped("compile", unmet("cpu", StageResult("cpu", "error", "AssertionError: boom")))
    assert unmet("compile", compile_record) == "compile was skipped (cpu failed (error: AssertionError: boom))"
