"""Environment variables, read one way everywhere: a flag, a word, a whole number.

Each variable keeps the spelling its owner accepts (the real backend reads some flags as exactly "1",
others as any of 1/true/yes); callers say which with `true` or `false`. An unset or blank variable is its
default.
"""

from __future__ import annotations

import os

TRUE_WORDS: tuple[str, ...] = ("1", "true", "yes", "on")
FALSE_WORDS: tuple[str, ...] = ("0", "false", "no", "off")


def raw(name: str) -> str | None:
    """The variable's value stripped of spaces, None when unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or None


def flag(name: str, default: bool = False, *, true: tuple[str, ...] = ("1",),
         false: tuple[str, ...] | None = None) -> bool:
    """On when the value (lower-cased) is one of `true`; with `false` given instead, on unless it is one
    of `false`."""
    value = raw(name)
    if value is None:
        return default
    return value.lower() not in false if false is not None else value.lower() in true


def word(name: str, default: str) -> str:
    """The value lower-cased, or `default`."""
    value = raw(name)
    return value.lower() if value is not None else default


def text(name: str, default: str | None = None) -> str | None:
    """The value as it is (paths, names), or `default`."""
    value = raw(name)
    return value if value is not None else default


def whole(name: str, default: int) -> int:
    """The value as an integer, or `default`; anything else raises RuntimeError naming the variable."""
    value = raw(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise RuntimeError(f"Invalid {name} value: {value}") from None


def snapshot(names: tuple[str, ...]) -> dict[str, str]:
    """The variables among `names` that are set, as set (what a report shows as "in effect")."""
    return {k: v for k, v in os.environ.items() if k in names}
