"""Environment switches of the device, each in a new process: autoload on/off, core counts, HBM size,
host collectives streams.

What torch decides while it is imported (autoload itself, its TORCH_DEVICE_BACKEND_AUTOLOAD switch, an import
order) is seen in a fresh interpreter (`run_python`). What the device reads when it is installed or used runs
in a fork of a process that has imported torch without the device (`forked_python`: the rank server behind
tests/conftest.py's PYTHON_EXEC): the child installs the device as autoload does, so its state (cores, HBM
budget, streams) is created from the child's own variables, as in a fresh process."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.subprocess


def test_bare_import_torch_autoloads_neuron(run_python):
    proc = run_python("""
        import torch
        print(torch.nn.Linear(3, 2).to("neuron").weight.device, torch.accelerator.current_accelerator())
    """)
    assert proc.stdout.split() == ["neuron:0", "neuron"]


@pytest.mark.parametrize("env, runner", [
    ({"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, "run_python"),  # torch reads it while it is imported
    ({"NEURONKIT_SIMULATOR": "0"}, "forked_python"),  # the device's autoload hook reads it
])
def test_autoload_can_be_switched_off(request, env, runner):
    proc = request.getfixturevalue(runner)("""
        import torch, neuronkit
        print(hasattr(torch, "neuron"), neuronkit.detect().kind)
    """, env=env)
    assert proc.stdout.split() == ["False", "none"]


@pytest.mark.parametrize("env, count", [
    ({"NEURON_RT_VISIBLE_CORES": "0-3"}, 4),
    ({"NEURON_RT_VISIBLE_CORES": "0,2,5-6"}, 4),
    ({"NEURON_RT_NUM_CORES": "8"}, 8),
    ({"NEURON_LOGICAL_NC_CONFIG": "1"}, 128),
])
def test_device_count_follows_runtime_variables(forked_python, env, count):
    proc = forked_python("import torch; print(torch.neuron.device_count())", env=env)
    assert int(proc.stdout) == count


def test_out_of_memory_when_core_hbm_is_exhausted(forked_python):
    proc = forked_python("""
        import torch
        keep = torch.empty(3 * 2**20, dtype=torch.uint8, device="neuron")
        try:
            torch.empty(2 * 2**20, dtype=torch.uint8, device="neuron")
        except torch.OutOfMemoryError as e:
            print("OOM", e)
        print("stats", torch.neuron.memory_stats()["num_ooms"])
    """, env={"NEURONKIT_HBM_PER_CORE": "4MiB"})
    assert "OOM NRT allocation failed for size 2097152 (OOM): 2.00 MiB on neuron:0" in proc.stdout
    assert "stats 1" in proc.stdout


def test_request_past_core_hbm_is_the_device_oom_before_any_host_memory(forked_python):
    # 1 PiB: past any core's HBM and any host's memory; the device's budget must refuse it first.
    proc = forked_python("""
        import torch
        try:
            torch.empty(2**50, dtype=torch.uint8, device="neuron")
        except torch.OutOfMemoryError as e:
            print("OOM", e)
        print("allocated", torch.neuron.memory_allocated(), "ooms", torch.neuron.memory_stats()["num_ooms"])
    """)
    assert "OOM NRT allocation failed for size 1125899906842624 (OOM)" in proc.stdout
    assert "allocated 0 ooms 1" in proc.stdout


def test_host_cc_gives_streams_their_own_queues(forked_python):
    code = "import torch; print(torch.neuron.Stream().stream_id, torch.neuron.Stream().stream_id)"
    assert forked_python(code).stdout.split() == ["0", "0"]
    ids = forked_python(code, env={"NEURON_RT_ENABLE_HOST_CC": "1"}).stdout.split()
    assert ids[0] != "0" and ids[0] != ids[1]


def test_device_map_auto_lands_on_neuron_or_refuses(forked_python):
    code = """
        from transformers import AutoModelForCausalLM
        try:
            m = AutoModelForCausalLM.from_pretrained("neuronkit/data/models/tiny-qwen3", device_map="auto")
            print("DEVICE", next(m.parameters()).device)
        except Exception as e:
            print("ERR", type(e).__name__, e)
    """
    assert "DEVICE neuron:0" in forked_python(code).stdout
    refused = forked_python(code, env={"NEURONKIT_HBM_PER_CORE": "64KiB"}).stdout
    assert "DEVICE cpu" not in refused and "ERR" in refused


@pytest.mark.parametrize("first", ["neuronkit.policy", "neuronkit.stages", "neuronkit"])
def test_importing_neuronkit_before_torch_still_installs_the_device(run_python, first):
    proc = run_python(f"import warnings; warnings.simplefilter('error'); import {first}; import torch; "
                      "print(torch.neuron.device_count())")
    assert proc.stdout.strip() == "64" and "could not install" not in proc.stderr


@pytest.mark.parametrize("env, where", [
    ({}, None),  # default level 1 (warnings): no NEFF-cache line, even with Python's logging at INFO
    ({"TORCH_NEURONX_LOG_LEVEL": "2"}, "stdout"),
    ({"TORCH_NEURONX_LOG_LEVEL": "info"}, None),  # atoi("info") is 0: errors only
    ({"TORCH_NEURONX_LOG_LEVEL": "3", "TORCH_NEURONX_LOG_FILE": "neuron.log"}, "file"),
])
def test_neff_cache_lines_follow_the_devices_log_level_not_pythons_logging(forked_python, tmp_path, env, where):
    """S: NeuronLogging.h:54-128: the device's own logger, level from TORCH_NEURONX_LOG_LEVEL (default 1)."""
    env = {k: str(tmp_path / v) if k == "TORCH_NEURONX_LOG_FILE" else v for k, v in env.items()}
    proc = forked_python("""
        import logging, torch
        logging.basicConfig(level=logging.INFO)
        (torch.ones(3, device="neuron") * 2).cpu()
    """, env=env)
    log_file = tmp_path / "neuron.log"
    seen = {"stdout": proc.stdout, "file": log_file.read_text() if log_file.exists() else ""}
    assert "[NEFF_CACHE]" not in proc.stderr
    for place, text in seen.items():
        assert ("[Neuron] [INFO] [NEFF_CACHE] Cache MISS for key: " in text) == (place == where), (place, text)


def test_a_device_that_cannot_even_import_its_detection_leaves_import_torch_working(run_python):
    """The autoload's failure path must not fail in turn: a broken neuronkit.device.detect is a one-line
    warning, and torch imports without a neuron device."""
    proc = run_python("""
        import sys
        sys.modules["neuronkit.device.detect"] = None  # any import of it raises ImportError
        import torch
        print("neuron" if hasattr(torch, "neuron") else "no neuron", torch.ones(1).item())
    """)
    assert proc.stdout.split() == ["no", "neuron", "1.0"], proc.stdout + proc.stderr
    assert "neuronkit could not install the simulated neuron device" in proc.stderr
