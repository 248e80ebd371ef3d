"""What a kernel that breaks one of Trainium's rules raises, and the warning for reading unwritten memory."""

from __future__ import annotations


class NkiRuleError(ValueError):
    """A kernel did something the NeuronCore cannot do (tile too large, memory full, out of bounds...).

    The real toolchain reports these when it compiles the kernel; the message names the rule, the
    numbers involved and the usual way around it."""


class NkiUninitializedReadWarning(UserWarning):
    """A kernel read memory it never wrote; the values read are NaN, as in the Neuron SDK's simulator."""


class NkiUnsupportedAttributeError(NotImplementedError, AttributeError):
    """An `nki` module attribute outside the subset: NotImplementedError naming it when used, and an
    AttributeError for feature detection (`hasattr(nl, "x")` is False, `from nki.language import x` is an
    ImportError)."""


def unsupported(api: str, attribute: bool = False) -> NotImplementedError:
    """The error for an NKI API outside the subset neuronkit interprets."""
    kind = NkiUnsupportedAttributeError if attribute else NotImplementedError
    return kind(
        f"{api} is not implemented by neuronkit's NKI interpreter, which covers the subset of nki.language "
        "and nki.isa that the public NKI tutorials and NKI-lib's core kernels use (docs/nki.md lists it). Run "
        "the kernel with the Neuron SDK (nki.simulate or a Trainium instance) to use it.")
