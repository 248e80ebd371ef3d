"""`torch.neuron`: the device module, with the API of torch_neuronx's `neuron.py` (behaviour doc §1).

Registered with `torch._register_device_module("neuron", ...)`, so `torch.neuron.*`,
`torch.get_device_module("neuron")` and accelerate/transformers' Neuron branches all reach it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from neuronkit.device.simulator import compiled_graphs, kernel, native
from neuronkit.device.simulator.config import SimConfig
from neuronkit.device.simulator.streams import (  # noqa: F401 - re-exported as torch.neuron.*
    Event,
    Stream,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

CONFIG: SimConfig | None = None  # set by registration.install()
_initialized = False


@dataclass(frozen=True)
class NeuronDeviceProperties:
    """What `get_device_properties` reports: the instance family and one logical core's HBM."""

    name: str
    total_memory: int
    logical_nc_config: int
    type: str = "neuron"


def is_available() -> bool:
    """True when at least one (simulated) logical NeuronCore is visible."""
    return device_count() > 0


def device_count() -> int:
    """Visible logical NeuronCores (NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES); in a process a
    process group placed, the local world size (native runtime, csrc/device.cpp)."""
    return native.device_count() if CONFIG else 0


def is_initialized() -> bool:
    return _initialized


def init() -> None:
    """Initialize the runtime (lazy in the real backend; instant here). Raises the runtime's
    RuntimeError when the configuration cannot start (a visible core past the count)."""
    global _initialized
    if CONFIG is not None and CONFIG.init_error:
        raise RuntimeError(CONFIG.init_error)
    _initialized = True


def _check_index(device: Any) -> int:
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, got {device}")
        index = device.index if device.index is not None else native.current_device()
    elif isinstance(device, str):
        return _check_index(torch.device(device))
    elif device is None:
        index = native.current_device()
    else:
        index = int(device)
    if not 0 <= index < device_count():
        # S's wording: torch_neuronx/__init__.py:204 (set_device)
        raise ValueError(f"Invalid device id: {index}. Valid range is 0 to {device_count() - 1}")
    return index


def _index_or_device(device: Any, function: str) -> Any:
    """`device`, unless it is a string: TorchNeuron's set_device and memory functions take an index or a
    torch.device and read `device.index`, which for a string is the method str.index, so the call fails with a
    TypeError (S: torch_neuronx/neuron.py:22-33 with __init__.py:196-206; memory.py:13-25 passing it to _C)."""
    if isinstance(device, str):
        raise TypeError(f"torch.neuron.{function}() takes a device index or a torch.device, not the string "
                        f"{device!r}: pass torch.device({device!r})")
    return device


def current_device() -> int:
    """This thread's current device index (native runtime: one per thread, as CUDA's)."""
    return native.current_device()


def set_device(device: int | str | torch.device) -> None:
    """Select this thread's current device; raises ValueError("Invalid device id: ...") when out of range,
    and, in a distributed process, for any core but its own (native runtime, csrc/device.cpp, as S
    torch_neuronx/csrc/core/NeuronDevice.cpp set_device). Like S's, it only validates and sets the index:
    it does not start the runtime, so the CUDA-style `set_device(local_rank)` before
    `init_process_group()` works."""
    native.set_device(_check_index(_index_or_device(device, "set_device")))


class device:  # noqa: N801 - the torch.<device>.device context manager (torch.load relies on it)
    """Context manager that changes the current device."""

    def __init__(self, device: int | str | torch.device | None) -> None:
        self.index = -1 if device is None else _check_index(device)
        self.previous = -1

    def __enter__(self) -> None:
        self.previous = native.current_device()
        if self.index >= 0:
            native.set_device(self.index)

    def __exit__(self, *exc: object) -> None:
        native.set_device(self.previous)


def get_device_name(device: int | torch.device = 0) -> str:
    """`"neuron:<idx>"` for an index (device 0 by default, whichever is current), a torch.device as it prints, as
    the real backend returns (not a hardware name); anything else is its ValueError (S: torch_neuronx/neuron.py:36-53)."""
    if isinstance(device, torch.device):
        return str(device)
    if isinstance(device, int):
        return f"neuron:{device}"
    raise ValueError(f"Incorrect device argument found, expected torch.device or int type, found {type(device)}")


def get_device_properties(device: int | str | torch.device | None = None) -> NeuronDeviceProperties:
    _check_index(device)
    return NeuronDeviceProperties(CONFIG.instance_family, CONFIG.hbm_bytes_per_core, CONFIG.logical_nc_config)


def get_device_capability(device: int | str | torch.device | None = None) -> dict[str, Any]:
    """What the device supports, for `torch.accelerator`-style capability queries."""
    _check_index(device)
    return {"supported_dtypes": get_amp_supported_dtype() + [torch.int8, torch.int16, torch.int32, torch.bool]}


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float32, torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def synchronize(device: int | str | torch.device | None = None) -> None:
    """Wait for queued work. The simulated device runs each op when it is issued, so this returns."""
    _check_index(device)


def _is_in_bad_fork() -> bool:
    return False


# RNG: one default generator per device (torch_neuronx/neuron.py: manual_seed and seed act on the current
# device's, manual_seed_all on every device's; torch.manual_seed calls manual_seed_all). Each holds a
# 16-byte (seed, offset) state (S csrc/core/NeuronHooksInterface.cpp:17-98); random ops draw from the host
# generator, as S's CPU fallbacks do (see rng.py).
def _generator(device: int | str | torch.device | None = None) -> torch.Generator:
    return native.default_generator(_check_index(device))


def manual_seed(seed: int) -> None:
    """Seed the current device's default generator."""
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every device's default generator."""
    for index in range(device_count()):
        _generator(index).manual_seed(int(seed))


def seed() -> None:
    """Seed the current device's default generator with a random number."""
    _generator().seed()


def seed_all() -> None:
    """One random seed for every device, as torch_neuronx's seed_all."""
    manual_seed_all(_generator(0).seed())


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device: int | str | torch.device | None = None) -> torch.Tensor:
    """The device's default generator state (default: the current device)."""
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: int | str | torch.device | None = None) -> None:
    _generator(device).set_state(new_state.cpu())


def get_rng_state_all() -> list[torch.Tensor]:
    """Used by accelerate's checkpointing; one state per visible device."""
    return [get_rng_state(index) for index in range(device_count())]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


# Memory: bytes held by neuron tensors, counted against each logical core's HBM.
def _account(device: int | torch.device | None, function: str):
    return kernel.STATE.hbm[_check_index(_index_or_device(device, function))]


def memory_stats(device: int | torch.device | None = None) -> dict[str, Any]:
    return _account(device, "memory_stats").stats()


def memory_allocated(device: int | str | torch.device | None = None) -> int:
    return _account(device, "memory_allocated").current


def max_memory_allocated(device: int | str | torch.device | None = None) -> int:
    return _account(device, "max_memory_allocated").peak


def memory_reserved(device: int | str | torch.device | None = None) -> int:
    """Always 0, as the source documents (S: torch_neuronx/memory.py:38,88-101)."""
    _account(device, "memory_reserved")
    return 0


max_memory_reserved = memory_reserved


def reset_peak_memory_stats(device: int | str | torch.device | None = None) -> None:
    _account(device, "reset_peak_memory_stats").reset_peak()


def reset_accumulated_memory_stats(device: int | str | torch.device | None = None) -> None:
    _account(device, "reset_accumulated_memory_stats").reset_accumulated()


def mem_get_info(device: int | str | torch.device | None = None) -> tuple[int, int]:
    """(free, total) bytes of the core's HBM."""
    hbm = _account(device, "mem_get_info")
    return hbm.capacity - hbm.current, hbm.capacity


def empty_cache() -> None:
    """Release cached blocks (the simulator frees memory as soon as tensors die)."""


def memory_summary(device: int | str | torch.device | None = None, abbreviated: bool = False) -> str:
    stats = memory_stats(device)
    free, total = mem_get_info(device)
    return (f"neuron:{_check_index(device)} simulated {CONFIG.instance_family} logical NeuronCore\n"
            f"  allocated: {stats['allocated_bytes']['current']:,} bytes (peak "
            f"{stats['allocated_bytes']['peak']:,})\n  free: {free:,} of {total:,} bytes\n"
            f"  allocations: {stats['allocation_requests']:,}, frees: {stats['num_tensor_frees']:,}, "
            f"OOMs: {stats['num_ooms']}")


# Stream operations on the current stream (S: torch_neuronx/neuron.py:256-274).
def wait_stream(stream: Stream) -> None:  # noqa: F811 - the source names the argument `stream`
    """Make the current stream wait for another stream."""
    current_stream().wait_stream(stream)


def wait_event(event: Event) -> None:
    """Make the current stream wait for an event."""
    current_stream().wait_event(event)


def record_event(event: Event | None = None) -> Event:
    """Record an event on the current stream."""
    return current_stream().record_event(event)


def query() -> bool:
    """Whether all work on the current stream has completed."""
    return current_stream().query()


def neff_cache_stats() -> dict[str, object]:
    """Eager NEFF compile-cache statistics (neuronkit addition; the real backend logs them)."""
    return kernel.STATE.cache.stats()


def get_dynamo_metrics() -> list[dict[str, Any]]:
    """One record per graph the `neuron` torch.compile backend compiled."""
    return list(compiled_graphs.METRICS)


def reset_dynamo_metrics() -> None:
    compiled_graphs.METRICS.clear()
