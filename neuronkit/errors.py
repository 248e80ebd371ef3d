"""Errors neuronkit raises for bad input, and the checks every entry point shares: one clear line for
the user, nothing lost."""

from __future__ import annotations

from typing import Any

# The dtypes the neuron device computes in (behaviour doc §2: BF16, FP32, FP16; 64-bit is emulated).
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")


class NeuronkitInputError(ValueError):
    """Bad user input (missing or corrupt checkpoint, unknown architecture, wrong parameter type).

    The CLI prints its message on one line and exits with status 2.
    """


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
