"""Streams and events with TorchNeuron's documented semantics.

Non-default streams are multiplexed onto one hardware queue: creating a stream returns the default
stream (id 0) unless NEURON_RT_ENABLE_HOST_CC=1, which hands out ids from a round-robin pool; priority,
ordering and event semantics are kept (seed article; behaviour doc §5, torch_neuronx/streams.py). The
simulated device executes every op synchronously, so work is complete when it is enqueued: queries
report done and synchronize returns at once.
"""

from __future__ import annotations

import itertools
import threading
import time

import torch

from neuronkit.device.simulator import native

_POOL_SIZE = 4
_pool = itertools.cycle(range(1, _POOL_SIZE + 1))
_current = threading.local()


class Stream:
    """A Neuron stream: an ordered queue of work on one device."""

    host_cc = False  # set at install from NEURON_RT_ENABLE_HOST_CC

    def __init__(self, device: int | str | torch.device | None = None, priority: int = 0,
                 *, stream_id: int | None = None) -> None:
        self.device = _device(device)
        self.priority = priority
        if stream_id is None:
            stream_id = next(_pool) if Stream.host_cc else 0
        self.stream_id = stream_id

    def query(self) -> bool:
        """True: all work enqueued on the simulated device has completed."""
        return True

    def synchronize(self) -> None:
        """Wait for the stream's work (complete on enqueue in the simulator)."""

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event: "Event") -> None:
        """Order later work on this stream after `event` (already true in the simulator)."""

    def wait_stream(self, stream: "Stream") -> None:
        """Record an event on `stream` and wait for it, as torch_neuronx does."""
        self.wait_event(stream.record_event())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and (self.device, self.stream_id) == (other.device, other.stream_id)

    def __hash__(self) -> int:
        return hash((self.device, self.stream_id))

    def __repr__(self) -> str:
        return f"<torch.neuron.Stream device={self.device} stream_id={self.stream_id} priority={self.priority}>"


class Event:
    """A marker in a stream; `elapsed_time` between two timing events is in milliseconds."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False) -> None:
        self.enable_timing = enable_timing
        self.blocking = blocking
        self._recorded_ns: int | None = None

    def record(self, stream: Stream | None = None) -> None:
        self._recorded_ns = time.perf_counter_ns()

    def query(self) -> bool:
        return True

    def wait(self, stream: Stream | None = None) -> None:
        """Make `stream` wait for this event (already ordered in the simulator)."""

    def synchronize(self) -> None:
        """Wait until the event completes (complete when recorded in the simulator)."""

    def elapsed_time(self, end_event: "Event") -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Events must be created with enable_timing=True to measure elapsed time")
        if self._recorded_ns is None or end_event._recorded_ns is None:
            raise RuntimeError("Both events must be recorded before calling elapsed_time")
        return (end_event._recorded_ns - self._recorded_ns) / 1e6


def _device(device: int | str | torch.device | None) -> torch.device:
    if device is None:  # this thread's current device, from the native runtime (module.current_device's)
        return torch.device("neuron", native.current_device())
    if isinstance(device, int):
        return torch.device("neuron", device)
    return torch.device(device)


def default_stream(device: int | str | torch.device | None = None) -> Stream:
    return Stream(device, stream_id=0)


def current_stream(device: int | str | torch.device | None = None) -> Stream:
    return getattr(_current, "stream", None) or default_stream(device)


def set_stream(stream: Stream) -> None:
    _current.stream = stream


class stream:  # noqa: N801 - mirrors torch.cuda.stream
    """Context manager selecting a stream for the enclosed work."""

    def __init__(self, s: Stream | None) -> None:
        self.stream = s
        self.previous: Stream | None = None

    def __enter__(self) -> Stream | None:
        self.previous = getattr(_current, "stream", None)
        if self.stream is not None:
            _current.stream = self.stream
        return self.stream

    def __exit__(self, *exc: object) -> None:
        _current.stream = self.previous
