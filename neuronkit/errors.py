"""Errors neuronkit raises for bad input, and the checks every entry point shares: one clear line for
the user, nothing lost."""

from __future__ import annotations

from typing import Any

# The dtypes the neuron device computes in (behaviour doc §2: BF16, FP32, FP16; 64-bit is emulated).
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")


class NeuronkitInputError(ValueError):
    """Bad user input (missing or corrupt checkpoint, unknown architecture, wrong parameter type).

    The CLI prints its message on one line and exits with status 2; a notebook shows its message alone, with
    no traceback (`_render_traceback_`).
    """

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for this error in a notebook, instead of a traceback through neuronkit's code:
        the message, which says what to change (IPython calls this hook of an exception it displays)."""
        return str(self).splitlines() or [type(self).__name__]


class NeuronkitMissingStage(NeuronkitInputError):
    """A notebook run before the stage records it needs exist (or pass): the message names what is missing
    and the command that makes it (`neuronkit.pipeline.flow.require`)."""


def positive_int_problem(name: str, value: Any) -> str | None:
    """Why `value` is not a positive integer, or None when it is."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{name} must be a positive integer, got {type(value).__name__} {value!r}"
    if value < 1:
        return f"{name} must be a positive integer, got {value}"
    return None


def require_positive_ints(**values: Any) -> None:
    """Raise NeuronkitInputError when a numeric parameter is not a positive integer."""
    problems = [p for name, value in values.items() if (p := positive_int_problem(name, value))]
    if problems:
        raise NeuronkitInputError("; ".join(problems))
