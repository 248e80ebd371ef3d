"""The simulated device's native runtime (neuronkit/device/simulator/csrc): real `neuron:N` device indices,
the current device per thread, generators, per-core HBM accounting, storage resize, pinned memory,
serialization, and how the extension is built and found."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import threading

import pytest
import torch
from conftest import ROOT
from torch import nn


@pytest.fixture(autouse=True)
def _restore_current_device():
    previous = torch.neuron.current_device()
    yield
    torch.neuron.set_device(previous)


def test_tensors_live_on_the_requested_core():
    t = torch.ones(2, device="neuron:3")
    assert t.device == torch.device("neuron:3")
    assert (t * 2 + 1).device == torch.device("neuron:3")
    assert t.to("neuron:2").device == torch.device("neuron:2")
    assert torch.equal(t.to("neuron:2").cpu(), torch.ones(2))
    assert repr(t) == "tensor([1., 1.], device='neuron:3')"


def test_set_device_and_device_contexts_choose_the_core():
    torch.neuron.set_device(1)
    assert torch.neuron.current_device() == 1
    assert torch.empty(1, device="neuron").device == torch.device("neuron:1")
    with torch.neuron.device(2):
        assert torch.zeros(1, device="neuron").device == torch.device("neuron:2")
    assert torch.neuron.current_device() == 1
    with torch.device("neuron:3"):
        assert torch.zeros(1).device == torch.device("neuron:3")
    with pytest.raises(ValueError, match="Invalid device id: 64"):
        torch.neuron.set_device(64)


def test_current_device_is_per_thread():
    torch.neuron.set_device(2)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(torch.neuron.current_device()))
    thread.start()
    thread.join()
    assert seen == [0] and torch.neuron.current_device() == 2


def test_module_to_and_autograd_on_another_core():
    model = nn.Linear(4, 2).to("neuron:2")
    assert {p.device for p in model.parameters()} == {torch.device("neuron:2")}
    model(torch.ones(3, 4, device="neuron:2")).sum().backward()
    assert model.weight.grad.device == torch.device("neuron:2")
    assert torch.allclose(model.weight.grad.cpu(), torch.full((2, 4), 3.0))


def test_arguments_on_two_cores_are_a_device_mismatch():
    with pytest.raises(RuntimeError, match="found at least two devices, neuron:1 and neuron:2"):
        torch.ones(2, device="neuron:1") + torch.ones(2, device="neuron:2")


def test_seeded_generator_on_a_core_repeats_its_draws():
    gen = torch.Generator(device="neuron:1")
    assert gen.device == torch.device("neuron:1")
    gen.manual_seed(7)
    first = torch.randn(4, generator=gen, device="neuron:1")
    gen.manual_seed(7)
    again = torch.randn(4, generator=gen, device="neuron:1")
    assert first.device == torch.device("neuron:1") and torch.equal(first.cpu(), again.cpu())
    host = torch.get_rng_state()
    assert not torch.equal(first.cpu(), torch.randn(4, generator=gen, device="neuron:1").cpu())
    assert gen.get_state().numel() == 16 and gen.get_offset() == 8  # one Philox block (4) per draw
    assert torch.equal(torch.get_rng_state(), host)  # a device generator's draw leaves the host's alone


def test_torch_manual_seed_seeds_every_core():
    torch.manual_seed(2)  # torch_neuronx tests/device/test_rng_state.py: test_torch_manual_seed_seeds_neuron
    assert torch.neuron.initial_seed() == 2
    assert torch.Generator(device="neuron:1").device == torch.device("neuron:1")
    with torch.neuron.device(5):
        assert torch.neuron.initial_seed() == 2
        torch.neuron.manual_seed(9)
        assert torch.neuron.initial_seed() == 9
    assert torch.neuron.initial_seed() == 2


def test_each_core_has_its_own_default_generator_and_random_ops_draw_from_the_host():
    torch.neuron.manual_seed_all(3)  # S: a core's generator is a seed and offset; random ops are CPU fallbacks
    with torch.neuron.device(1):
        torch.neuron.manual_seed(4)
    assert [torch.neuron.get_rng_state(i)[:8].view(torch.int64).item() for i in (0, 1)] == [3, 4]
    torch.manual_seed(11)
    host_expected = torch.rand(3)
    torch.manual_seed(11)
    state_1 = torch.neuron.get_rng_state(1)
    assert torch.equal(torch.rand(3, device="neuron:0").cpu(), host_expected)
    assert torch.equal(torch.neuron.get_rng_state(1), state_1)
    states = torch.neuron.get_rng_state_all()
    assert len(states) == torch.neuron.device_count()
    torch.neuron.manual_seed_all(5)
    torch.neuron.set_rng_state_all(states)
    assert torch.equal(torch.neuron.get_rng_state(1), state_1)
    host = torch.get_rng_state()
    dropped = torch.nn.functional.dropout(torch.ones(64, device="neuron:2"), 0.5)
    torch.set_rng_state(host)
    assert torch.equal(torch.nn.functional.dropout(torch.ones(64, device="neuron:2"), 0.5).cpu(), dropped.cpu())


def test_hbm_is_counted_per_core():
    before = [torch.neuron.memory_allocated(i) for i in (0, 1)]
    block = torch.empty(2**20, dtype=torch.uint8, device="neuron:1")
    assert torch.neuron.memory_allocated(1) - before[1] == 2**20
    assert torch.neuron.memory_allocated(0) == before[0]
    assert torch.neuron.memory_stats(1)["allocated_bytes"]["current"] == torch.neuron.memory_allocated(1)
    del block
    assert torch.neuron.memory_allocated(1) == before[1]


def test_storage_resize_frees_and_rematerialises_like_fsdp2():
    param = torch.arange(8.0, device="neuron:1")
    storage = param.untyped_storage()
    before = torch.neuron.memory_allocated(1)
    storage.resize_(0)
    assert storage.nbytes() == 0 and torch.neuron.memory_allocated(1) == before - 32
    storage.resize_(32)
    assert torch.neuron.memory_allocated(1) == before
    param.copy_(torch.arange(8.0))
    assert torch.equal((param * 1).cpu(), torch.arange(8.0))
    fresh = torch.UntypedStorage(16, device="neuron:2")
    assert fresh.device == torch.device("neuron:2") and fresh.nbytes() == 16


def test_pin_memory_pins_on_the_host_allocator():
    host = torch.arange(6.0)
    pinned = host.pin_memory()
    assert pinned.is_pinned() and not host.is_pinned()
    assert pinned.device.type == "cpu" and torch.equal(pinned, host)
    assert pinned[3:].is_pinned()
    assert torch.equal(pinned.to("neuron:1").cpu(), host)


def test_save_and_load_keep_the_core():
    buffer = io.BytesIO()
    torch.save({"w": torch.arange(4.0, device="neuron:3")}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)["w"]
    assert loaded.device == torch.device("neuron:3") and torch.equal(loaded.cpu(), torch.arange(4.0))
    buffer.seek(0)
    assert torch.load(buffer, weights_only=True, map_location="cpu")["w"].device == torch.device("cpu")


@pytest.mark.subprocess
def test_a_new_process_autoloads_the_native_runtime_with_its_core_count_and_hbm(forked_python):
    # a fork that installs the device as autoload does (conftest's forked_python): the runtime reads both
    # variables when it is installed; `import torch` autoloading it is test_bare_import_torch_autoloads_neuron's
    proc = forked_python("""
        import torch
        t = torch.ones(2, device="neuron:3")
        print(t.device, torch.accelerator.device_count(), torch.neuron.device_count())
        try:
            torch.empty(3 * 2**20, dtype=torch.uint8, device="neuron:1")
        except torch.OutOfMemoryError as exc:
            print("OOM", exc)
    """, env={"NEURON_RT_NUM_CORES": "4", "NEURONKIT_HBM_PER_CORE": "2MiB"})
    first, oom = proc.stdout.splitlines()
    assert first == "neuron:3 4 4"
    assert oom.startswith("OOM NRT allocation failed for size 3145728 (OOM): 3.00 MiB on neuron:1")


@pytest.mark.subprocess
def test_unbuilt_extension_is_one_line_naming_the_build_command(tmp_path, forked_python):
    # a fork that installs the device from the copy without its extension (conftest's forked_python)
    shutil.copytree(ROOT / "neuronkit", tmp_path / "neuronkit", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    proc = forked_python("import torch; print(hasattr(torch, 'neuron'))", env={"PYTHONPATH": str(tmp_path)},
                         cwd=tmp_path)
    assert proc.stdout.strip() == "False"
    warning = [line for line in proc.stderr.splitlines() if "neuronkit" in line]
    assert len(warning) == 1
    assert "native device runtime is not built for torch" in warning[0]
    assert "pip install --no-build-isolation -e ." in warning[0]


@pytest.mark.subprocess
def test_build_without_a_compiler_says_so_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "setup.py", "build_ext", "--build-temp", str(tmp_path)], cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "CXX": "no-such-g++"}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        ("neuronkit build: no C++ compiler ('no-such-g++' not found); install g++ (Debian: apt-get install g++, "
         "or `make build-deps`)")]
