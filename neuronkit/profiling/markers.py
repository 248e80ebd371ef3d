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


def hide_in_notebook() -> None:
    """Run every later cell of this IPython session inside `without_trace_markers` (registered once; nothing
    outside IPython): a notebook's own profiler cells then stay free of the markers without a wrapper in
    them. A cell's other stderr output follows when the cell ends."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or getattr(shell, "_neuronkit_hides_trace_markers", False):
        return
    held: list[contextlib.AbstractContextManager] = []

    def before(_info: object) -> None:
        held.append(without_trace_markers())
        held[-1].__enter__()

    def after(_result: object) -> None:
        while held:
            held.pop().__exit__(None, None, None)

    shell.events.register("pre_run_cell", before)
    shell.events.register("post_run_cell", after)
    shell._neuronkit_hides_trace_markers = True
