"""The device's own log, as TorchNeuron's `NeuronLogger` writes it: not Python's `logging`, so a script that
sets logging to INFO does not get the device's NEFF-cache lines, as it would not on Trainium.

S: csrc/core/NeuronLogging.h:20,54-128. The level comes from TORCH_NEURONX_LOG_LEVEL (0 error, 1 warning,
2 info, 3 debug; read with atoi, so a word reads as 0; out of range is ignored; default 1), read once at the
first message, as is TORCH_NEURONX_LOG_FILE. A line reads `[Neuron] [INFO] message`; it is appended to that
file when set and it opens, else warnings and errors go through TORCH_WARN (a Python UserWarning) and info
and debug to stdout.
"""

from __future__ import annotations

import re
import sys
import warnings

from neuronkit import env

ERROR, WARNING, INFO, DEBUG = range(4)
_LABELS = ("[ERROR]", "[WARNING]", "[INFO]", "[DEBUG]")
_settings: tuple[int, str | None] | None = None


def _atoi(text: str) -> int:
    """C's atoi: leading spaces, a sign and digits; 0 when there are none."""
    match = re.match(r"\s*[+-]?\d+", text)
    return int(match.group()) if match else 0


def settings() -> tuple[int, str | None]:
    """The level and log file in effect, read from the environment at the first call (the logger's constructor)."""
    global _settings
    if _settings is None:
        value = _atoi(env.raw("TORCH_NEURONX_LOG_LEVEL") or str(WARNING))
        _settings = (value if ERROR <= value <= DEBUG else WARNING, env.text("TORCH_NEURONX_LOG_FILE"))
    return _settings


def log(severity: int, message: str) -> None:
    """Write one line of the device's log when `severity` is within the level."""
    level, path = settings()
    if severity > level:
        return
    line = f"[Neuron] {_LABELS[severity]} {message}"
    if path is not None:
        try:
            with open(path, "a", encoding="utf-8") as out:
                out.write(line + "\n")
            return
        except OSError:  # S: a file that does not open leaves the logger on its console output
            pass
    if severity <= WARNING:
        warnings.warn(line, UserWarning, stacklevel=2)
    else:
        print(line, file=sys.stdout, flush=True)
