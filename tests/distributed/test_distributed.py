"""The `neuron` process group: real torchrun jobs on simulated cores, with parity against one CPU process,
and the real backend's rules (S = parmoham-aws/test-repo-parmoham, torch_neuronx/distributed/backend.py).

Two torchrun jobs cover every scenario: 2 ranks on one node, and 4 ranks as two localhost "nodes" of two
(the 2-D mesh and all_to_all, which the device refuses between 2 processes, and the collectives across
nodes). A rank placed on a core past the first two: test_local_rank_sets_device_count_visible_cores_and_device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from neuronkit import client_paths
from neuronkit.device.process_group import rules
from neuronkit.distributed import launch
from neuronkit.distributed import record as record_module
from neuronkit.distributed.record import PARITY_TOL

TOL = PARITY_TOL
TWO_RANKS = ["collectives", "ddp", "fsdp1", "fsdp2", "tp", "sp", "pp", "dtensor", "dcp", "compile", "random_init",
             "premul_sum", "flex"]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> list[dict]:
    return launch.run(TWO_RANKS, nproc=2, timeout=300, out=tmp_path_factory.mktemp("two_ranks"))


def _each(results: list[dict], name: str) -> list[dict]:
    return [r["scenarios"][name] for r in results]


def test_backend_is_registered_for_the_neuron_device():
    assert dist.Backend.default_device_backend_map["neuron"] == "neuron"
    assert "NEURON" in dist.Backend._plugins


@pytest.mark.subprocess
def test_each_rank_gets_its_local_core(two_ranks):
    assert [(r["rank"], r["local_rank"], r["device"], r["visible_cores"], r["simulated"]) for r in two_ranks] == [
        (0, 0, "neuron:0", "0", True), (1, 1, "neuron:1", "1", True)]
    assert all(r["backend"] == "neuron:neuron" for r in two_ranks)  # a bare init_process_group() picked it


@pytest.mark.subprocess
def test_collectives_move_data_and_show_their_bytes_in_the_profiler(two_ranks):
    for rank, result in enumerate(_each(two_ranks, "collectives")):
        assert result["all_reduce_ok"]
        assert result["all_gather"] == [3.0] * 8
        assert result["reduce_scatter"] == [[0.0, 2.0], [4.0, 6.0]][rank]
        assert result["all_reduce_avg"] == [0.5, 0.5]  # gloo has no AVG: summed, then divided
        assert result["scatter"] == [float(rank)] * 2
        assert result["gather"] == ([[0.0, 0.0], [10.0, 10.0]] if rank == 0 else None)
        assert result["objects"] == [{"rank": 0}, {"rank": 1}]
        assert result["profiled"] == [
            {"kind": "all_reduce", "bytes": 16, "group_size": 2}, {"kind": "all_gather", "bytes": 32, "group_size": 2},
            {"kind": "reduce_scatter", "bytes": 16, "group_size": 2},
            {"kind": "broadcast", "bytes": 16, "group_size": 2}, {"kind": "barrier", "bytes": 0, "group_size": 2}]


@pytest.mark.subprocess
@pytest.mark.parametrize("scenario", ["ddp", "fsdp1", "fsdp2", "tp"])
def test_training_matches_one_cpu_process(two_ranks, scenario):
    for result in _each(two_ranks, scenario):
        assert result["param_diff"] < TOL, result
    if scenario == "tp":  # every tensor-parallel rank sees the whole batch: the CPU's losses
        assert _each(two_ranks, "tp")[0]["losses"] == pytest.approx(_each(two_ranks, "tp")[0]["reference_losses"],
                                                                     abs=TOL)


@pytest.mark.subprocess
def test_ddp_communication_hooks_fail_as_the_source_records(two_ranks):
    """S: tests/pytorch_tests/specs/ddp_spec.json:113,149 marks every DDP comm-hook test failing with this
    error ([TODO-FIX post Beta]); plain DDP trains (test_training_matches_one_cpu_process)."""
    for result in _each(two_ranks, "ddp"):
        assert result["comm_hook_error"] == "Neuron backend doesn't support acquiring a stream from pool"


@pytest.mark.subprocess
def test_fsdp2_holds_half_the_parameters_on_each_core(two_ranks):
    for result in _each(two_ranks, "fsdp2"):
        assert result["local_param_bytes"] == result["full_param_bytes"] // 2
        assert result["local_param_bytes"] <= result["device_bytes_after_shard"] < 0.6 * result["full_param_bytes"]


@pytest.mark.subprocess
def test_sequence_and_pipeline_parallel_match_the_cpu(two_ranks):
    for result in _each(two_ranks, "sp"):
        assert result["output_diff"] < TOL and result["grad_diff"] < TOL
    pipeline = _each(two_ranks, "pp")
    assert all(r["grad_diff"] < TOL for r in pipeline)
    assert pipeline[1]["loss_diff"] < TOL  # the last stage computes the loss


@pytest.mark.subprocess
def test_dtensor_ops_and_the_two_process_all_to_all_limit(two_ranks):
    for rank, result in enumerate(_each(two_ranks, "dtensor")):
        assert result["max_diff"] < TOL
        assert result["local_device"] == f"neuron:{rank}"
        assert "Neuron does not support 2 process all_to_all" in result["shard_to_shard_error"]


@pytest.mark.subprocess
def test_distributed_checkpoint_round_trip(two_ranks):
    for result in _each(two_ranks, "dcp"):
        assert result["diff_before_load"] > 0.01 and result["param_diff"] == 0.0
        assert result["files"] == [".metadata", "__0_0.distcp", "__1_0.distcp"]


@pytest.mark.subprocess
def test_functional_collectives_under_compile(two_ranks):
    for rank, result in enumerate(_each(two_ranks, "compile")):
        assert result == {"diff": 0.0, "graphs": 1, "device": f"neuron:{rank}"}


@pytest.mark.subprocess
def test_fsdp2_random_init_on_the_cores_moves_the_philox_offset_and_matches_the_cpu(two_ranks):
    """DTensor random init through PyTorch's RNG tracker (S csrc/core/NeuronHooksInterface.cpp:17-98: a 16-byte
    seed and offset); each shard holds the host's draws from the state before init, as S's CPU-fallback random
    ops give (S tests/device/test_rng_state.py:85-104) under the tracker's fork_rng; then FSDP2's gradient
    divide factor, a PREMUL_SUM reduce-scatter."""
    results = _each(two_ranks, "random_init")
    for result in results:
        assert result["state_bytes"] == 16 and result["offset_before"] == 0 and result["host_restored"]
        assert result["offset_after"] == sum((n + 3) // 4 * 4 for n in result["full_numels"])
        assert result["init_diff"] == 0.0 and result["grad_diff"] < TOL
    # every parameter's shard drew from the same host state: the client finding, with its remedy
    assert "Initialise on the CPU before sharding" in client_paths.find("torch.distributed", "random_init").remedy


@pytest.mark.subprocess
def test_premul_sum_multiplies_then_sums_as_the_real_process_group(two_ranks):
    """S torch_neuronx/distributed/utils.py:63-89 (parse_and_update_inputs) from backend.py:528, 888, 971."""
    for result in _each(two_ranks, "premul_sum"):
        assert result["all_reduce"] == result["expected_all_reduce"]
        assert result["scatter_diff"] == 0.0 and result["input_unchanged"] == 0.0
        assert "PREMUL_SUM is not modelled" in result["reduce_error"] and "gloo" not in result["reduce_error"].lower()


@pytest.mark.subprocess
def test_compiled_flex_attention_on_two_cores_matches_the_cpu(two_ranks):
    """S neuron_dynamo_backend/fx/passes/flex_attention_legalization.py:33-50."""
    for rank, result in enumerate(_each(two_ranks, "flex")):
        assert result["output_diff"] < 1e-5 and result["grad_diff"] < 1e-5 and result["device"] == f"neuron:{rank}"


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory) -> list[dict]:
    """Four ranks as two localhost "nodes" of two (two launchers meeting at one endpoint, each with its
    local ranks 0 and 1 on its own neuron:0 and neuron:1): the multi-node job and the four-rank one at once."""
    return launch.run(["collectives", "fsdp2_tp", "all_to_all"], nproc=2, nnodes=2, timeout=300,
                      out=tmp_path_factory.mktemp("two_nodes"))


@pytest.mark.subprocess
def test_four_ranks_fsdp2_with_tensor_parallel_and_all_to_all(two_nodes):
    for result in _each(two_nodes, "fsdp2_tp"):
        assert result["param_diff"] < TOL
    for result in _each(two_nodes, "all_to_all"):
        assert result["diff"] == 0.0
        assert "Only even split sizes are supported" in result["split_error"]


@pytest.mark.subprocess
def test_two_nodes_on_localhost(two_nodes):
    assert [(r["rank"], r["local_rank"], r["device"]) for r in two_nodes] == [
        (0, 0, "neuron:0"), (1, 1, "neuron:1"), (2, 0, "neuron:0"), (3, 1, "neuron:1")]
    for rank, result in enumerate(_each(two_nodes, "collectives")):
        # reduce_scatter of arange(2 * world) from every rank: this rank's pair of it, times the world size
        assert result["all_reduce_ok"] and result["reduce_scatter"] == [4.0 * 2 * rank, 4.0 * (2 * rank + 1)]


_SINGLE = """
import os, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="localhost", MASTER_PORT=str({port}))
"""


def _single_rank(run_python, body: str, env: dict[str, str] | None = None, check: bool = True):
    return run_python(_SINGLE.format(port=launch.free_port()) + body,
                      env={"RANK": "0", "WORLD_SIZE": "1", **(env or {})}, check=check)


@pytest.mark.subprocess
def test_the_real_backends_setup_rules_are_enforced(run_python):
    proc = _single_rank(run_python, """
from neuronkit.distributed.launch import free_port
os.environ["NEURON_RT_VISIBLE_CORES"] = "0-1"
try:
    dist.init_process_group(backend="neuron")
except RuntimeError as exc:
    print(exc)
del os.environ["NEURON_RT_VISIBLE_CORES"]
os.environ["MASTER_PORT"] = str(free_port())
torch.ones(2, device="neuron")
try:
    dist.init_process_group(backend="neuron")
except RuntimeError as exc:
    print(exc)
""")
    one_core, initialized = proc.stdout.strip().split("\n")
    assert one_core.startswith("Attempted to have more than one device per process in distributed setup")
    assert initialized.startswith("Neuron runtime should not be initialized before the init_process_group")
    assert "torch_neuronx/distributed/backend.py" in initialized


@pytest.mark.subprocess
def test_local_rank_sets_device_count_visible_cores_and_device(run_python):
    proc = _single_rank(run_python, """
dist.init_process_group()
print(torch.neuron.current_device(), torch.neuron.device_count(), os.environ["NEURON_RT_VISIBLE_CORES"])
t = torch.ones(3, device="neuron")
dist.all_reduce(t)
print(t.device, dist.get_backend_config())
torch.neuron.set_device(3)
try:
    torch.neuron.set_device(0)
except ValueError as exc:
    print(exc)
""", env={"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4"})
    lines = proc.stdout.split("\n")
    assert lines[:2] == ["3 4 3", "neuron:3 neuron:neuron"]
    assert lines[2].startswith("Device index 0 is out of range. Valid range is 3 to 3 for this process")


@pytest.mark.subprocess
def test_a_placed_process_holds_memory_on_its_own_core_only(run_python):
    """S torch_neuronx/csrc/core/NeuronDevice.cpp: after placement device_count() is the local world size,
    get_vnc_id refuses a core below the process's and one past the local world size, and the runtime's
    allocation fails for a core past the one the process sees (allocator/NeuronCachingAllocator.cpp);
    threads that choose no device are on the process's core (global_default_device)."""
    proc = _single_rank(run_python, """
import threading
dist.init_process_group()
for index in (0, 2, 4):
    try:
        torch.ones(2, device=f"neuron:{index}")
    except (RuntimeError, ValueError) as exc:
        print(str(exc).splitlines()[0])
print(torch.empty(0, device="neuron:0").device, torch.ones(2, device="neuron:1").device)
seen = []
thread = threading.Thread(target=lambda: seen.append(torch.ones(1, device="neuron").device))
thread.start(), thread.join()
print(seen[0], torch.neuron.device_count())
""", env={"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"})
    lines = proc.stdout.strip().split("\n")
    assert lines[0].startswith("Attempted to access device that doesn't attach to this process, received 0 "
                               "expected to be equal or greater than 1")
    assert lines[1].startswith("NRT allocation failed for size 8")
    assert lines[2].startswith("Device index 4 is out of range. Valid range is 0 to 3")
    assert lines[3:] == ["neuron:0 neuron:1", "neuron:1 4"]


@pytest.mark.subprocess
def test_without_local_rank_ranks_are_grouped_by_host_and_device_id_is_refused(run_python):
    proc = _single_rank(run_python, """
try:
    dist.init_process_group(backend="neuron", device_id=torch.device("neuron", 0))
except RuntimeError as exc:
    print(exc)
print(torch.neuron.current_device(), torch.neuron.device_count())
""")
    refused, placed = proc.stdout.strip().split("\n")
    assert refused.startswith("init_process_group(device_id=...) fails with the neuron process group")
    assert placed == "0 1"


def test_all_to_all_group_sizes():
    with pytest.raises(RuntimeError, match="Neuron does not support 2 process all_to_all"):
        rules.check_all_to_all(2, 8)
    with pytest.raises(RuntimeError, match="supported sizes are 4, 8, 16 and multiples of 32"):
        rules.check_all_to_all(6, 12)
    with pytest.raises(ValueError, match="not divisible by group_size: 8"):
        rules.check_all_to_all(8, 12)
    for size in (1, 4, 8, 16, 32, 64):
        rules.check_all_to_all(size, 64)


def test_all_to_all_split_sizes():
    rules.check_splits(None, "input", 4)
    rules.check_splits([1, 1, 1, 1], "input", 4)
    with pytest.raises(NotImplementedError, match=r"Only even split sizes are supported. Got output_split_sizes: \[2, 2\]"):
        rules.check_splits([2, 2], "output", 2)
    with pytest.raises(NotImplementedError, match="length \\(3\\) must match group_size \\(4\\)"):
        rules.check_splits([1, 2, 1], "input", 4)


def test_float8_collectives_are_refused():
    rules.check_dtypes([torch.ones(2, dtype=torch.bfloat16)])
    with pytest.raises(RuntimeError, match="do not support dtype torch.float8_e4m3fn"):
        rules.check_dtypes([torch.ones(2).to(torch.float8_e4m3fn)])


def _rank_result(rank: int, plan_diff: float) -> dict:
    """One rank's result as `launch.run` returns it (the scenario figures are inputs here, not outcomes)."""
    fsdp = {"param_diff": plan_diff, "losses": [2.0 + rank, 1.0], "reference_losses": [2.5, 1.0],
            "full_param_bytes": 800, "local_param_bytes": 400, "device_bytes_after_shard": 448}
    return {"rank": rank, "device": f"neuron:{rank}", "backend": "neuron:neuron", "simulated": True,
            "scenarios": {"ddp": {"param_diff": 0.0, "losses": [2.0 + rank], "reference_losses": [2.5]},
                          "fsdp2": fsdp}}


def test_the_record_summarizes_parity_and_shards():
    summary = record_module.summarize([_rank_result(0, 1e-7), _rank_result(1, 1e-3)], plan="fits")
    assert summary["devices"] == ["neuron:0", "neuron:1"]
    assert summary["scenarios"]["ddp"] == {"max_param_diff": 0.0, "parity": True, "losses": [2.5],
                                           "reference_losses": [2.5]}
    fsdp = summary["scenarios"]["fsdp2"]
    assert (fsdp["parity"], fsdp["losses"], fsdp["param_bytes_per_rank"]) == (False, [2.5, 1.0], [400, 400])


def test_the_report_gets_a_distributed_card_from_the_record(tmp_path):
    from neuronkit import report
    from neuronkit.pipeline.record import RunDir, StageResult

    RunDir(tmp_path).write(StageResult("environment", "pass", "ok", {}))
    evil = "</script><script>alert(1)</script>"
    summary = record_module.summarize([_rank_result(0, 1e-7), _rank_result(1, 2e-7)], plan=evil)
    record_module.write(tmp_path, summary)
    paths = report(tmp_path)
    html = paths.html.read_text()
    card = html[html.index('<section id="distributed">'):]
    assert "Distributed training on 2 simulated cores" in card and "status-pass" in card
    assert evil not in html and "&lt;/script&gt;&lt;script&gt;alert(1)" in card
    assert "400 bytes" in card
    assert json.loads(paths.json.read_text())["distributed"]["scenarios"]["fsdp2"]["parity"] is True

    (tmp_path / record_module.RECORD).write_text('{"scenarios": {"ddp": {"parity": "yes"}}}')
    assert record_module.read(tmp_path) is None
    assert '<section id="distributed">' not in report(tmp_path).html.read_text()


def test_unknown_scenarios_are_refused_before_launching():
    from neuronkit.errors import NeuronkitInputError
    with pytest.raises(NeuronkitInputError, match=r"unknown scenario\(s\) \['zero3'\]; choose from \['all_to_all'"):
        launch.run(["ddp", "zero3"])


@pytest.mark.subprocess
def test_a_failing_job_names_its_error(tmp_path, monkeypatch):
    """On fresh interpreters, as users run torchrun: the one job of the tests whose ranks are not forked from
    the tests' warm server (PYTHON_EXEC, tests/conftest.py), so the product's real path stays tested."""
    monkeypatch.delenv("PYTHON_EXEC", raising=False)
    with pytest.raises(RuntimeError, match="Neuron does not support 2 process all_to_all"):
        launch.run(["all_to_all"], nproc=2, timeout=300, out=tmp_path)


def test_training_needs_a_causal_lm_that_fits(zoo, tmp_path):
    from transformers import LlamaConfig

    from neuronkit.errors import NeuronkitInputError
    assert launch.untrainable("tiny-qwen3") == ""
    assert launch.untrainable(zoo["vit"]).endswith("is a model for image classification; the training scenarios "
                                                   "train a causal LM")
    LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=16,
                vocab_size=32000, architectures=["LlamaForCausalLM"]).save_pretrained(tmp_path)
    assert "GiB of float32 parameters, above the 1 GiB" in launch.untrainable(tmp_path / "config.json")
    with pytest.raises(NeuronkitInputError, match="image classification"):
        launch.run(["ddp"], model=zoo["vit"])


_CUDA_STYLE_SCRIPT = """
import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

local_rank = int(os.environ["LOCAL_RANK"])
torch.neuron.set_device(local_rank)  # the CUDA habit: pick the core, then make the process group
dist.init_process_group()
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(8, 4).to("neuron"), device_ids=[local_rank])
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(16, 8).to("neuron")
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
weight = model.module.weight.detach().to("cpu")
gathered = [torch.empty_like(weight) for _ in range(dist.get_world_size())]
dist.all_gather_object(gathered, weight)
same = all(torch.equal(w, weight) for w in gathered)
with open(os.path.join(os.path.dirname(__file__), f"rank{dist.get_rank()}.txt"), "w") as out:  # ranks share stdout
    out.write(f"rank {dist.get_rank()} on {torch.neuron.current_device()} same weights {same}")
dist.destroy_process_group()
"""


@pytest.mark.subprocess
def test_a_cuda_style_script_sets_the_device_before_the_process_group(tmp_path):
    """S torch_neuronx/csrc/core/NeuronDevice.cpp `set_device` only validates and sets the thread's index: it
    does not start the runtime, so `set_device(local_rank)` before `init_process_group()` passes
    `_neuron_runtime_setup`'s assert (distributed/backend.py) and the ranks train on their own cores."""
    script = tmp_path / "train.py"
    script.write_text(_CUDA_STYLE_SCRIPT)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--rdzv-backend", "c10d",
         "--rdzv-endpoint", f"localhost:{launch.free_port()}", str(script)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [(tmp_path / f"rank{rank}.txt").read_text() for rank in (0, 1)]
    assert lines == ["rank 0 on 0 same weights True", "rank 1 on 1 same weights True"]
