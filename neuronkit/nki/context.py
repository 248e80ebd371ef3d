"""The state of one kernel launch: program ids, on-chip memory in use, the buffers already warned about.

The interpreter runs one launch at a time on one thread; `current()` is that launch. On-chip capacity is
checked against the live tiles: a tile's bytes are held while the kernel can still reach it (CPython
frees it when its last reference goes), so a tile allocated in a loop body and dropped each iteration
counts once, while tiles kept in a list (hoisted loads) add up, as they do on the device. This is a lower
bound of what the compiler allocates (it may keep extra buffers to overlap iterations)."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from neuronkit.nki.errors import NkiRuleError
from neuronkit.nki.hardware import Core

_current: Launch | None = None


class Launch:
    """One call of a kernel over its SPMD grid."""

    def __init__(self, kernel_name: str, grid: tuple[int, ...], core: Core, abstract: bool, ledger: Any) -> None:
        self.kernel_name = kernel_name
        self.grid = grid
        self.core = core
        self.abstract = abstract  # tracing for shapes: no warnings
        self.program: tuple[int, ...] = ()
        self.used = {"sbuf": 0, "psum": 0}
        self.peak = {"sbuf": 0, "psum": 0}
        self.shared_hbm: list[Any] = []  # the launch's shared HBM outputs, in allocation order
        self.shared_seen = 0  # how many the current program instance has allocated
        self.warned: dict[int, Any] = {}  # memory already warned about, by id
        self.names = 0
        self.vector_registers = np.full(core.pmax, -np.inf, dtype=np.float32)  # accumulators (reduce_cmd)
        self.stores: dict[tuple[str, str], tuple[Any, Any]] = {}  # placed tensors' memory (store())
        # The engine time its instructions are estimated to take: a neuronkit.nki.cost.Ledger, given by the
        # launcher (cost reads the current launch, so this module does not import it).
        self.ledger = ledger

    def store(self, buffer: str, dtype: Any) -> tuple[Any, Any]:
        """(values, written) of `buffer`'s memory as elements of `dtype`, partitions first: what tensors placed
        with `address=` view. Allocated on first use; untouched pages cost no memory."""
        key = (buffer, dtype.name)
        if key not in self.stores:
            shape = (self.core.pmax, self.capacity(buffer) // dtype.itemsize)
            self.stores[key] = (np.zeros(shape, dtype=dtype.storage), np.zeros(shape, dtype=bool))
        return self.stores[key]

    def capacity(self, buffer: str) -> int:
        return self.core.sbuf_bytes_per_partition if buffer == "sbuf" else self.core.psum_bytes_per_partition

    def hold(self, owner: object, buffer: str, nbytes: int, what: str) -> None:
        """Account `nbytes` per partition of `buffer` to `owner` until it is garbage."""
        used = self.used[buffer] + nbytes
        limit = self.capacity(buffer)
        if used > limit:
            raise NkiRuleError(
                f"{buffer.upper()} is full: {what} needs {_kib(nbytes)} per partition, {_kib(self.used[buffer])} "
                f"of {_kib(limit)} per partition are already held by live tiles on one {self.core.name} "
                f"({self.core.target}). Free tiles (do not keep every tile of a loop in a list), make tiles "
                "smaller, or store partial results to HBM.")
        self.used[buffer] = used
        self.peak[buffer] = max(self.peak[buffer], used)
        weakref.finalize(owner, self._release, buffer, nbytes)

    def _release(self, buffer: str, nbytes: int) -> None:
        self.used[buffer] -= nbytes

    def next_name(self, buffer: str) -> str:
        self.names += 1
        return f"{buffer}_tensor_{self.names}"


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n % 1024 else f"{n // 1024} KiB"


def current() -> Launch:
    """The launch being interpreted; NKI language calls outside a kernel are an error, as in NKI."""
    if _current is None:
        raise RuntimeError("nki.language and nki.isa calls only work inside a kernel decorated with @nki.jit "
                           "while it runs")
    return _current


def enter(launch: Launch | None) -> Launch | None:
    """Make `launch` current; returns the previous one to restore with `enter(previous)`."""
    global _current
    previous, _current = _current, launch
    return previous
