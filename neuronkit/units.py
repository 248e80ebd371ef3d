"""Human-readable sizes for messages and reports."""


def format_bytes(nbytes: int | float) -> str:
    """`25165824` -> `24.00 MiB`."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{int(nbytes)} bytes"
