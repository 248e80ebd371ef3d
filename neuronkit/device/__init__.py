"""The `neuron` device: adopt the real TorchNeuron backend when present, otherwise simulate it.

`_autoload` is PyTorch's `torch.backends` entry point (pyproject.toml), so `import torch` alone makes
`neuron` usable, exactly as the real torch_neuronx autoloads (behaviour doc §1). It is off with
`TORCH_DEVICE_BACKEND_AUTOLOAD=0` (upstream's switch, which skips every entry point) or
`NEURONKIT_SIMULATOR=0`. With a `neuron` device, real or simulated, it also registers Lightning's `neuron`
accelerator for when Lightning is imported (neuronkit.clients.lightning).
"""

from __future__ import annotations

import warnings


def _autoload() -> None:
    """Install the simulator unless the real backend (or the user) says otherwise.

    A failure here must not break `import torch` for every program in the environment: it is reported
    as a one-line warning and the process goes on without a `neuron` device."""
    try:
        from neuronkit.device.detect import decide

        kind = decide().kind
        if kind == "simulated":
            from neuronkit.device.simulator import install
            from neuronkit.placement import install_auto_device_map_bridge

            install()
            install_auto_device_map_bridge()
        if kind != "none":  # Lightning's `neuron` accelerator needs only torch.neuron, real or simulated
            from neuronkit.clients import lightning

            lightning.install()
    except Exception as exc:  # noqa: BLE001 - reported, never fatal to `import torch`
        failure = f"neuronkit could not install the simulated neuron device: {exc}"
        try:
            from neuronkit.device import detect

            detect.autoload_failure = failure  # kept for `neuronkit detect`
        except Exception:  # noqa: BLE001 - detect itself may be what failed to import
            pass
        # Attributed to no source line, so that the warning prints as one line.
        warnings.warn_explicit(failure, RuntimeWarning, "neuronkit", 0)
