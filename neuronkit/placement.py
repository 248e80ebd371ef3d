"""`device_map` for the `neuron` device: resolve "neuron", "neuron:N", "auto", ints and dicts.

accelerate's `get_max_memory` has no Neuron branch, so a plain `from_pretrained(device_map="auto")`
would silently put everything on CPU (behaviour doc §7; design/simulated-device.md §F). neuronkit gives
it the device's HBM instead: "auto" lands on neuron:0 when the model fits one logical core, and a model
that does not fit gets an error naming its size and the budget, never a silent CPU placement.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Mapping

import torch
from torch._subclasses.fake_tensor import FakeTensor

from neuronkit.errors import NeuronkitInputError
from neuronkit.post_import import when_imported
from neuronkit.units import format_bytes

_BRIDGED_MODULE = "transformers.integrations.accelerate"
# Where from_pretrained calls the bridged `_get_device_map`, under a name it imported from there.
_CALLER_MODULE = "transformers.modeling_utils"
_ACCELERATE_LOGGER = "accelerate.utils.modeling"
_DTYPE_BYTES = {torch.float32: 4, torch.float16: 2, torch.bfloat16: 2, torch.float64: 8, torch.int8: 1}


class DoesNotFitError(NeuronkitInputError):
    """The model needs more HBM than one logical NeuronCore has."""


def neuron_available() -> bool:
    """True when a `neuron` device (real or simulated) is usable in this process."""
    module = getattr(torch, "neuron", None)
    return module is not None and module.is_available()


def hbm_budget(index: int = 0) -> int:
    """Free bytes on neuron core `index`."""
    return torch.neuron.mem_get_info(index)[0]  # (free, total)


def model_bytes(model_or_config: Any, dtype: torch.dtype | None = None) -> int:
    """Bytes of parameters and buffers: counted on a model, estimated on the meta device for a config."""
    if isinstance(model_or_config, torch.nn.Module):
        seen, total = set(), 0
        for t in [*model_or_config.parameters(), *model_or_config.buffers()]:
            # A meta or fake tensor (the audit's weightless FakeTensorMode model) has no storage to share: counted
            # by identity (a tied weight is one Parameter), never by a data pointer, which a FakeTensor only warns of.
            key = id(t) if t.device.type == "meta" or isinstance(t, FakeTensor) else \
                (t.untyped_storage().data_ptr(), t.storage_offset(), t.numel())
            if key not in seen:
                seen.add(key)
                total += t.numel() * (_DTYPE_BYTES.get(dtype, t.element_size()) if dtype else t.element_size())
        return total
    from transformers import AutoModel, PretrainedConfig

    if not isinstance(model_or_config, PretrainedConfig):
        raise NeuronkitInputError(
            f"resolve_device_map needs a torch.nn.Module or a transformers PretrainedConfig, got "
            f"{type(model_or_config).__name__}")
    with torch.device("meta"):
        model = AutoModel.from_config(model_or_config)
    config_dtype = getattr(model_or_config, "torch_dtype", None) or getattr(model_or_config, "dtype", None)
    if isinstance(config_dtype, str):
        config_dtype = getattr(torch, config_dtype, None)
    return model_bytes(model, dtype or config_dtype or torch.float32)


def resolve_device_map(spec: str | int | torch.device | Mapping[str, Any] | None,
                       model_or_config: Any = None, *, dtype: torch.dtype | None = None) -> dict[str, str]:
    """Turn a `device_map` into an explicit `{module: device}` map that transformers can load with.

    "neuron" / "neuron:N" / torch.device / int N → everything on that core; "auto" → neuron:0 when a
    neuron device exists and the model fits its HBM (else an error naming size and budget), CPU when no
    neuron device exists; a dict is validated and its neuron entries normalized.
    """
    if spec is None:
        return {"": "cpu"}
    if isinstance(spec, Mapping):
        return {str(k): _device_name(v) for k, v in spec.items()}
    if isinstance(spec, str) and spec == "auto":
        if not neuron_available():
            return {"": "cpu"}
        target = "neuron:0"
    else:
        target = _device_name(spec)
    if target.startswith("neuron") and model_or_config is not None:
        index = int(target.partition(":")[2] or 0)
        needed = model_bytes(model_or_config, dtype)
        budget = hbm_budget(index)
        if needed > budget:
            raise DoesNotFitError(
                f"the model needs {format_bytes(needed)} of HBM but {target} has {format_bytes(budget)} free "
                f"({format_bytes(torch.neuron.get_device_properties(index).total_memory)} per logical NeuronCore): "
                f"load it in bfloat16, or shard it across cores with tensor parallelism")
    return {"": target}


def _device_name(value: Any) -> str:
    if isinstance(value, bool):
        raise NeuronkitInputError(f"device_map value {value!r} is not a device")
    if isinstance(value, int):
        value = f"neuron:{value}" if neuron_available() else f"cuda:{value}"
    if isinstance(value, torch.device):
        value = str(value)
    if not isinstance(value, str):
        raise NeuronkitInputError(f"device_map value {value!r} ({type(value).__name__}) is not a device")
    if value in ("cpu", "disk", "meta"):
        return value
    try:
        device = torch.device(value)
    except RuntimeError as exc:
        raise NeuronkitInputError(f"device_map value {value!r} is not a device: {exc}") from None
    if device.type == "neuron":
        if not neuron_available():
            raise NeuronkitInputError(f"device_map asks for {value!r} but no neuron device is available "
                                      "(run `neuronkit detect`)")
        index = device.index or 0
        if index >= torch.neuron.device_count():
            raise NeuronkitInputError(f"device_map asks for {value!r} but only {torch.neuron.device_count()} "
                                      "neuron device(s) are visible")
        return f"neuron:{index}"
    return str(device)


def _neuron_max_memory(original):
    """accelerate's get_max_memory, taught that device 0 is neuron:0 with its free HBM."""

    def get_max_memory(max_memory=None):
        if max_memory is None and neuron_available():
            # Only the neuron core: a model that does not fit fails instead of landing on CPU/disk.
            return {0: hbm_budget(0), "cpu": 0}
        return original(max_memory)

    get_max_memory.__wrapped__ = original
    return get_max_memory


def _refuse_partial_placement(original, module):
    """transformers' `_get_device_map`, refusing an "auto" map that would spill off the neuron core."""

    def _get_device_map(model, device_map, max_memory, hf_quantizer):
        resolved = original(model, device_map, max_memory, hf_quantizer)
        if isinstance(device_map, str) and max_memory is None and neuron_available() and isinstance(resolved, dict):
            spilled = sorted({str(d) for d in resolved.values() if d not in (0, "neuron", "neuron:0")})
            if spilled:
                needed = module.compute_module_sizes(model)[0][""]
                raise DoesNotFitError(
                    f"device_map={device_map!r}: the model needs {format_bytes(needed)} but neuron:0 has "
                    f"{format_bytes(hbm_budget(0))} of HBM free, so parts would land on {', '.join(spilled)}. "
                    f"Load it in bfloat16, or shard it across cores with tensor parallelism.")
        return resolved

    _get_device_map.__wrapped__ = original
    return _get_device_map


def _patch(module) -> None:
    original = getattr(module, "accelerate_max_memory", None)
    if original is not None and not hasattr(original, "__wrapped__"):
        module.accelerate_max_memory = _neuron_max_memory(original)
    original = getattr(module, "_get_device_map", None)
    if original is not None and not hasattr(original, "__wrapped__"):
        module._get_device_map = _refuse_partial_placement(original, module)


def _rebind(caller) -> None:
    """Give from_pretrained's module the bridged `_get_device_map`: it imported the name, so a device installed
    after it was imported (autoload off, then the device loaded by hand; or a process forked from one that
    imported transformers first) would leave it calling the original, which places what does not fit on the
    CPU or disk without a word."""
    bridged = getattr(sys.modules.get(_BRIDGED_MODULE), "_get_device_map", None)
    if getattr(bridged, "__wrapped__", None) is not None and caller.__dict__.get("_get_device_map") is bridged.__wrapped__:
        caller._get_device_map = bridged


class _NeuronCoreIds(logging.Filter):
    """accelerate checks integer device ids against CUDA's device count alone, so the bridge's `{0: HBM}`
    makes it log "Device 0 is not available" although the model lands on neuron:0; that line is dropped
    while a neuron device is usable (accelerate.utils.modeling.get_max_memory)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith("Device ") and " is not available, available devices are " in message
                    and neuron_available())


def install_auto_device_map_bridge() -> None:
    """Make transformers' `device_map="auto"` see the neuron device's HBM (now or when it is imported)."""
    when_imported(_BRIDGED_MODULE, _patch)
    when_imported(_CALLER_MODULE, _rebind)
    accelerate_logger = logging.getLogger(_ACCELERATE_LOGGER)
    if not any(isinstance(f, _NeuronCoreIds) for f in accelerate_logger.filters):
        accelerate_logger.addFilter(_NeuronCoreIds())
