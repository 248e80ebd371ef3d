"""What a kernel that breaks one of Trainium's rules raises, and the warning for reading unwritten memory."""

from __future__ import annotations


class NkiRuleError(ValueError):
    """A kernel did something the NeuronCore cannot do (tile too large, memory full, out of bounds...).

    The real toolchain reports these when it compiles the kernel; the message names the rule, the
    numbers involved and the usual way around it."""


class NkiUninitializedReadWarning(UserWarning):
    """A kernel read memory it never wrote; the values read are NaN, as in the Neuron SDK's simulator."""


def unsupported(api: str) -> NotImplementedError:
    """The error for an NKI API outside the subset neuronkit interprets."""
    return NotImplementedError(
        f"{api} is not implemented by neuronkit's NKI interpreter, which covers the subset of nki.language "
        "and nki.isa that the public NKI tutorials use (docs/nki.md lists it). Run the kernel with the "
        "Neuron SDK (nki.simulate or a Trainium instance) to use it.")
