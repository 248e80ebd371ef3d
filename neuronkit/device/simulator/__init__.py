"""The simulated `neuron` device: TorchNeuron's behaviour on any machine, backed by CPU memory."""


def install() -> None:
    """Register the simulated device in this process (idempotent)."""
    from neuronkit.device.simulator.registration import install as _install

    _install()
