"""Lightning as released on the simulated device: `Trainer(accelerator="neuron")` with nothing else changed
(neuronkit.clients.lightning, registered by the device's autoload), on one core or two, float32 or bf16-mixed,
DDP over torchrun; and the traps a hand-written accelerator meets, as the client findings name them
(neuronkit/data/client_paths.toml, client "lightning"). Lightning is imported by the tests that use it, not when
the module is collected (each xdist worker collects every module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from neuronkit import client_paths

SCRIPT = Path(__file__).with_name("lightning_ddp.py")
QUIET = dict(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
             enable_model_summary=False)


@pytest.fixture(scope="module")
def tiny() -> ModuleType:
    """tests/clients/lightning_module.py: the LightningModule and its data (importing Lightning)."""
    from clients import lightning_module

    return lightning_module


def _fit(tiny: ModuleType, **trainer_options):
    """One epoch of the tiny regression (four steps of four samples); the Trainer and the trained module."""
    import lightning.pytorch as pl

    model = tiny.Regression()
    trainer = pl.Trainer(**QUIET, **trainer_options)
    trainer.fit(model, torch.utils.data.DataLoader(tiny.dataset(), batch_size=4))
    return trainer, model


def test_trainer_on_neuron_trains_like_the_cpu_on_the_core_it_is_given(tiny):
    from lightning.pytorch.strategies import SingleDeviceStrategy

    _, on_cpu = _fit(tiny, accelerator="cpu")
    trainer, on_core = _fit(tiny, accelerator="neuron", devices=1)
    assert isinstance(trainer.strategy, SingleDeviceStrategy) and str(trainer.strategy.root_device) == "neuron:0"
    assert on_core.devices == {"neuron:0"} and on_core.losses == on_cpu.losses
    _, second = _fit(tiny, accelerator="neuron", devices=[1])
    assert second.devices == {"neuron:1"} and second.losses == on_cpu.losses


def test_bf16_mixed_autocasts_on_neuron(tiny):
    _, on_cpu = _fit(tiny, accelerator="cpu", precision="bf16-mixed")
    trainer, on_core = _fit(tiny, accelerator="neuron", precision="bf16-mixed")
    assert trainer.precision_plugin.device == "neuron"
    assert on_core.dtypes == {torch.bfloat16} and on_core.devices == {"neuron:0"}
    assert on_core.losses == pytest.approx(on_cpu.losses, abs=1e-2)  # bf16 on both, autocast lists may differ


def test_devices_the_process_does_not_have_are_refused_in_one_line(tiny):
    import lightning.pytorch as pl
    from lightning.pytorch.utilities.exceptions import MisconfigurationException

    cores = torch.neuron.device_count()
    with pytest.raises(MisconfigurationException, match=rf"asks for NeuronCores .* this process sees {cores} "):
        pl.Trainer(accelerator="neuron", devices=cores + 1, **QUIET)
    assert pl.Trainer(accelerator="neuron", **QUIET).num_devices == 1  # "auto": one core outside torchrun


def _hand_written() -> type:
    """The accelerator a team writes for `neuron` without neuronkit (issue 39's ~30 lines, shortened)."""
    from lightning.pytorch.accelerators import Accelerator

    class HandWritten(Accelerator):
        def setup_device(self, device): pass
        def get_device_stats(self, device): return {}
        def teardown(self): pass
        @staticmethod
        def parse_devices(devices): return [0]
        @staticmethod
        def get_parallel_devices(devices): return [torch.device("neuron", i) for i in devices]
        @staticmethod
        def auto_device_count(): return 1
        @staticmethod
        def is_available(): return True
        @staticmethod
        def name(): return "neuron-by-hand"

    return HandWritten


def test_without_neuronkits_accelerator_lightning_meets_the_findings(tiny):
    """The traps neuronkit's accelerator removes, as Lightning 2.6 sets them for any other accelerator, and
    `accelerator="auto"`, which it leaves as Lightning's choice."""
    import lightning.pytorch as pl
    from lightning.pytorch.accelerators import AcceleratorRegistry
    from lightning.pytorch.strategies import SingleDeviceStrategy

    # The registry's get() builds an accelerator, and monkeypatch.delitem saves what get() returns: it would
    # put an instance back where Lightning keeps a dict, breaking "neuron" for every later test in the process.
    registered = dict.__getitem__(AcceleratorRegistry, "neuron")
    del AcceleratorRegistry["neuron"]
    try:
        with pytest.raises(ValueError) as unknown:
            pl.Trainer(accelerator="neuron", **QUIET)
    finally:
        AcceleratorRegistry["neuron"] = registered
    assert client_paths.explain(unknown.value) == client_paths.find("lightning", "accelerator_name")

    _, model = _fit(tiny, accelerator=_hand_written()())
    assert model.devices == {"cpu"}  # single_device_cpu, and its remedy:
    _, model = _fit(tiny, accelerator=_hand_written()(), strategy=SingleDeviceStrategy(torch.device("neuron", 0)),
                    precision="bf16-mixed")
    assert model.devices == {"neuron:0"} and "SingleDeviceStrategy(device=torch.device(\"neuron\", 0))" in \
        client_paths.find("lightning", "single_device_cpu").remedy
    assert model.dtypes == {torch.float32}  # bf16_mixed
    assert 'MixedPrecision("bf16-mixed", device="neuron")' in client_paths.find("lightning", "bf16_mixed").remedy

    assert pl.Trainer(**QUIET).strategy.root_device.type == "cpu"  # auto_accelerator
    assert 'accelerator="neuron"' in client_paths.find("lightning", "auto_accelerator").remedy


def test_init_process_group_with_a_device_id_meets_the_ddp_finding(forked_python):
    """What Lightning's DDP strategy does on its own (device_id=its root device), in a one-rank group: the neuron
    process group cannot take it; neuronkit's accelerator leaves it out (the torchrun test below)."""
    proc = forked_python("""
        import torch, torch.distributed as dist
        try:
            dist.init_process_group("neuron", store=dist.HashStore(), rank=0, world_size=1,
                                    device_id=torch.device("neuron", 0))
        except Exception as exc:
            print(f"{type(exc).__name__}: {exc}")
    """)
    assert client_paths.explain(RuntimeError(proc.stdout)) == client_paths.find("lightning", "ddp_device_id"), \
        proc.stdout


def _reference(tiny: ModuleType) -> dict[str, torch.Tensor]:
    """The DDP run's two steps as one CPU process on both ranks' samples of each step: Lightning gives each rank
    a shuffling DistributedSampler (seed 0) over the training data."""
    model = tiny.Regression()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = tiny.dataset()
    features, target = data.tensors
    shares = [list(torch.utils.data.DistributedSampler(data, num_replicas=2, rank=rank, shuffle=True, seed=0))
              for rank in range(2)]
    for step in range(2):
        rows = [index for share in shares for index in share[4 * step:4 * step + 4]]
        torch.nn.functional.mse_loss(model.net(features[rows]), target[rows]).backward()
        optimizer.step()
        optimizer.zero_grad()
    return {name: p.detach() for name, p in model.named_parameters()}


@pytest.mark.subprocess
def test_ddp_over_torchrun_on_two_cores_matches_one_cpu_process(tiny, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(SCRIPT), str(tmp_path)], env=dict(os.environ), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    assert [(r["device"], r["seen"]) for r in ranks] == [("neuron:0", ["neuron:0"]), ("neuron:1", ["neuron:1"])]
    assert {(r["strategy"], r["backend"]) for r in ranks} == {("DDPStrategy", "neuron")}
    for name, expected in _reference(tiny).items():
        for rank in ranks:
            assert torch.tensor(rank["weights"][name]) == pytest.approx(expected, abs=1e-6), name
