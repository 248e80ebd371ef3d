"""Human-readable sizes and durations for messages, notebook displays and reports."""

from __future__ import annotations

import math

# A duration's unit, in seconds: the largest unit the value reaches is the one it is written in.
_DURATION_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def format_bytes(nbytes: int | float) -> str:
    """`25165824` -> `24.00 MiB`."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{int(nbytes)} bytes"


def format_count(n: int | float) -> str:
    """`1_240_000_000` -> `1.24B`, `26_800` -> `26.8k`, `512` -> `512`: a parameter or token count."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:g}"


def format_duration(seconds: float | None) -> str:
    """A duration rounded to three significant figures in the unit it reads best in: `0.00468` ->
    `4.68 ms`, `12.5` -> `12.5 s`, `125` -> `2 min 5 s`; None or NaN -> `—`."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "—"
    if abs(seconds) >= 60:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    if seconds == 0:
        return "0 s"
    unit, scale = next(((u, s) for u, s in _DURATION_UNITS if abs(seconds) >= s), _DURATION_UNITS[-1])
    value = seconds / scale
    return f"{value:.3g} {unit}" if abs(value) < 1000 else f"{value:,.0f} {unit}"


def format_ms(milliseconds: float | None) -> str:
    """Milliseconds as `format_duration` writes them (`4.678` -> `4.68 ms`, `1234.0` -> `1.23 s`)."""
    return format_duration(None if milliseconds is None else milliseconds / 1e3)
