"""Lightning's `Trainer(accelerator="neuron")`, with nothing to change in a training script.

TorchNeuron ships no Lightning integration (S has none), and Lightning 2.6 knows no `neuron` device: the name
is a ValueError, and a hand-written accelerator meets the traps the "lightning" rows of
neuronkit/data/client_paths.toml name. Lightning discovers accelerators only among its own modules' classes (no
entry point: lightning/fabric/utilities/registry.py `_register_classes`), so the device's autoload installs
`install()`'s post-import hooks, and when a script imports Lightning (`lightning.pytorch` or `pytorch_lightning`):

- `NeuronAccelerator` is registered as "neuron": `devices=N` takes cores 0..N-1, `devices=[i, ...]` those cores,
  `devices=-1` every visible core, "auto" one (under torchrun: one per process); each process's root device
  becomes `torch.neuron`'s current one;
- the Trainer's accelerator connector keeps a single-core run on its core: Lightning gives every accelerator but
  CUDA, MPS and XLA a `SingleDeviceStrategy("cpu")` (accelerator_connector.py `_choose_strategy`);
- "bf16-mixed" / "16-mixed" autocast on `neuron`: Lightning's default `MixedPrecision` autocasts "cuda" for any
  accelerator but the CPU and MPS (`_check_and_init_precision`), which leaves neuron tensors in float32;
- DDP (`devices=N`, or N processes of torchrun): Lightning's DDP strategy passes its root device to
  `init_process_group(device_id=...)`, which the neuron process group cannot take (S: ProcessGroupNeuron has
  no `supports_splitting`), and wraps the model in a torch.cuda.Stream for any device but the CPU; on `neuron`
  it does neither: the group selects `neuron:LOCAL_RANK` itself, and DDP finds the module's device from its
  parameters. The process group is torch.distributed's default for the device type, `neuron`.

`accelerator="auto"` still means Lightning's choice (never `neuron`). A precision plugin or strategy the user
passes is used as given.
"""

from __future__ import annotations

import functools
import importlib
import os
from types import ModuleType
from typing import Any

from neuronkit.post_import import when_imported

NAME = "neuron"
ROOTS = ("lightning.pytorch", "pytorch_lightning")  # the unified package, and the standalone one
_CONNECTOR = "trainer.connectors.accelerator_connector"
_ACCELERATORS: dict[str, type] = {}  # root package -> its NeuronAccelerator class


def install() -> None:
    """Register `neuron` with each Lightning package when it is imported (now, if it already is)."""
    for root in ROOTS:
        when_imported(f"{root}.accelerators", functools.partial(_register, root))
        when_imported(f"{root}.{_CONNECTOR}", functools.partial(_patch_connector, root))
        when_imported(f"{root}.strategies.ddp", _patch_ddp)


def accelerator_class(root: str = ROOTS[0]) -> type:
    """The NeuronAccelerator class for Lightning package `root` (imported if it is not yet)."""
    if root not in _ACCELERATORS:
        _register(root, importlib.import_module(f"{root}.accelerators"))
    return _ACCELERATORS[root]


def _register(root: str, accelerators: ModuleType) -> None:
    if root not in _ACCELERATORS:
        _ACCELERATORS[root] = _make_accelerator(accelerators.Accelerator, importlib.import_module(
            f"{root}.utilities.exceptions").MisconfigurationException)
    registry = accelerators.AcceleratorRegistry
    if NAME not in registry:
        _ACCELERATORS[root].register_accelerators(registry)


def _make_accelerator(base: type, misconfigured: type[Exception]) -> type:
    """NeuronAccelerator over Lightning's `Accelerator` base class `base`."""

    class NeuronAccelerator(base):
        """Accelerator for the `neuron` device (TorchNeuron's, or neuronkit's simulated one)."""

        def setup_device(self, device: Any) -> None:
            import torch

            if device.type != NAME:
                raise misconfigured(f"Device should be neuron, got {device} instead")
            torch.neuron.set_device(device)

        def setup(self, trainer: Any) -> None:
            pass

        def get_device_stats(self, device: Any) -> dict[str, Any]:
            import torch

            return dict(torch.neuron.memory_stats(device))

        def teardown(self) -> None:
            pass

        @staticmethod
        def parse_devices(devices: Any) -> list[int]:
            return parse_devices(devices, misconfigured)

        @staticmethod
        def get_parallel_devices(devices: list[int]) -> list[Any]:
            import torch

            return [torch.device(NAME, index) for index in devices]

        @staticmethod
        def auto_device_count() -> int:
            return auto_device_count()

        @staticmethod
        def is_available() -> bool:
            return _core_count() > 0

        @staticmethod
        def name() -> str:
            return NAME

        @classmethod
        def register_accelerators(cls, accelerator_registry: Any) -> None:
            accelerator_registry.register(NAME, cls, description="NeuronCores through torch.neuron (neuronkit)")

    return NeuronAccelerator


def _core_count() -> int:
    import torch

    module = getattr(torch, NAME, None)
    return module.device_count() if module is not None and module.is_available() else 0


def auto_device_count() -> int:
    """`devices="auto"`: one core, or under torchrun the node's process count (one process per core). Not every
    visible core, as Lightning's "auto" means for GPUs: a trn2.48xlarge has 64, and as many DDP processes on one
    host is rarely what a script that names no count wants (the simulator shows 64 too)."""
    import torch.distributed

    if torch.distributed.is_available() and torch.distributed.is_torchelastic_launched():
        return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return 1


def parse_devices(devices: Any, misconfigured: type[Exception] = ValueError) -> list[int]:
    """Lightning's `devices=` for NeuronCores: N (cores 0..N-1), -1 (every visible core), "auto"
    (`auto_device_count`), a list of core indices, or the same as a string ("2", "0,1"). Raises `misconfigured`
    for no core, or for one this process does not see."""
    count = _core_count()
    if isinstance(devices, str):
        text = devices.strip()
        if text == "auto":
            devices = auto_device_count()
        elif "," in text:
            devices = [int(part) for part in text.split(",") if part.strip()]
        else:
            devices = int(text)
    if isinstance(devices, bool) or not isinstance(devices, (int, list, tuple)):
        raise misconfigured(f"devices must be an int, a list of core indices or a string, got {devices!r}")
    if isinstance(devices, int):
        devices = list(range(count)) if devices == -1 else list(range(devices))
    cores = list(devices)
    if not cores:
        raise misconfigured("no NeuronCore requested: pass devices=N (N >= 1) or a list of core indices")
    missing = [core for core in cores if not 0 <= core < count]
    if missing or len(set(cores)) != len(cores):
        raise misconfigured(f"devices={devices!r} asks for NeuronCores {cores}, but this process sees {count} "
                            f"(0..{count - 1}), each at most once")
    return cores


def _patch_connector(root: str, connector_module: ModuleType) -> None:
    """The Trainer's accelerator connector: a single core's strategy and autocast on `neuron`."""
    connector = connector_module._AcceleratorConnector
    if hasattr(connector._choose_strategy, "__wrapped__"):
        return
    strategies = importlib.import_module(f"{root}.strategies")
    precision = importlib.import_module(f"{root}.plugins.precision")

    def on_neuron(self: Any) -> bool:
        return isinstance(getattr(self, "accelerator", None), accelerator_class(root))

    choose_strategy = connector._choose_strategy

    @functools.wraps(choose_strategy)
    def _choose_strategy(self: Any) -> Any:
        chosen = choose_strategy(self)
        if on_neuron(self) and isinstance(chosen, strategies.SingleDeviceStrategy):
            return strategies.SingleDeviceStrategy(device=self._parallel_devices[0])
        return chosen

    init_precision = connector._check_and_init_precision

    @functools.wraps(init_precision)
    def _check_and_init_precision(self: Any) -> Any:
        plugin = init_precision(self)
        if on_neuron(self) and plugin is not self._precision_plugin_flag and \
                isinstance(plugin, precision.MixedPrecision) and plugin.device != NAME:
            return precision.MixedPrecision(plugin.precision, device=NAME)
        return plugin

    connector._choose_strategy = _choose_strategy
    connector._check_and_init_precision = _check_and_init_precision


def _patch_ddp(ddp: ModuleType) -> None:
    """DDPStrategy on a neuron root device: no `device_id` for init_process_group, and no device ids for
    DistributedDataParallel (Lightning then makes a torch.cuda.Stream, ddp.py `_setup_model`); DDP takes the
    module's device from its parameters, as for the CPU."""
    connect, device_ids = ddp._init_dist_connection, ddp.DDPStrategy.determine_ddp_device_ids
    if hasattr(connect, "__wrapped__"):
        return

    @functools.wraps(connect)
    def _init_dist_connection(*args: Any, **kwargs: Any) -> None:
        if getattr(kwargs.get("device_id"), "type", None) == NAME:
            del kwargs["device_id"]
        connect(*args, **kwargs)

    @functools.wraps(device_ids)
    def determine_ddp_device_ids(self: Any) -> list[int] | None:
        return None if self.root_device.type == NAME else device_ids(self)

    ddp._init_dist_connection = _init_dist_connection
    ddp.DDPStrategy.determine_ddp_device_ids = determine_ddp_device_ids
