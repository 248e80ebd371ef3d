"""Kineto's trace markers kept out of a notebook's output, and only those.

PyTorch's profiler engine (kineto) writes `USDT:<time> <pid>:<tid> SyncActivityProfilerHandler.cpp:52]
profiler_start` (and `profiler_stop`) on stderr each time a profile starts and stops. Its log level is
above ERROR: with torch 2.13, `KINETO_LOG_LEVEL=5` still prints them and 6 hides them, but 6 also hides
kineto's errors (ERROR is 4), and the variable is read once per process. So instead of a level, this holds
the process's stderr (file descriptor 2, where kineto's C++ logger writes) for a block and passes every
line on when the block ends, except those two markers.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from typing import Iterator

TRACE_MARKER = re.compile(rb"^USDT:[^\]]*\] profiler_(start|stop)\s*$")


@contextlib.contextmanager
def without_trace_markers() -> Iterator[None]:
    """Run the block with kineto's profiler_start/stop markers dropped from stderr; everything else the
    block writes to file descriptor 2 (kineto's warnings and errors included) follows when it ends."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = b"".join(line for line in held if not TRACE_MARKER.match(line))
            if kept:
                os.write(2, kept)
