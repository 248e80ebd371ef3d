"""Streams and events with TorchNeuron's documented semantics.

Non-default streams are multiplexed onto one hardware queue: creating a stream returns the default
stream (id 0) unless NEURON_RT_ENABLE_HOST_CC=1, which hands out ids from a round-robin pool; priority,
ordering and event semantics are kept (seed article; behaviour doc §5, torch_neuronx/streams.py). The
simulated device executes every op synchronously, so work is complete when it is enqueued: queries
report done and synchronize returns at once.

`Stream` is a `torch.Stream` subclass, as S's is (S torch_neuronx/csrc/Stream.cpp:439-442: its
`_NeuronStreamBase` has `tp_base = THPStreamClass`; torch_neuronx/streams.py:11 subclasses that), so torch
APIs that take a c10::Stream (`Tensor.record_stream`, FSDP's stream plumbing) accept it. `Event` is not a
`torch.Event` subclass, as S's is not (Stream.cpp:370-408, 452-461: `_NeuronEventBase` has no tp_base).
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import torch

from neuronkit.device.simulator import native

_POOL_SIZE = 4
_pool = itertools.cycle(range(1, _POOL_SIZE + 1))
_current = threading.local()
# c10::DeviceType::PrivateUse1, the device_type of every neuron stream (S Stream.cpp:14, 28).
_DEVICE_TYPE = int(torch._C._autograd.DeviceType.PrivateUse1)
_TRIPLE = ("stream_id", "device_index", "device_type")


class Stream(torch.Stream):
    """A Neuron stream: an ordered queue of work on one device (S torch_neuronx/streams.py:11-88).

    `Stream(device=None, priority=0)` makes a stream on `device` (the current device when None);
    `Stream(stream_id=..., device_index=..., device_type=...)` rebuilds one from its three fields, as
    S's current_stream/default_stream do (streams.py:27-35, csrc/Stream.cpp:39-40, 59-66). The fields,
    `==` and `hash` are torch.Stream's (S defines no tp_richcompare/tp_hash of its own, Stream.cpp:199, 209).
    """

    host_cc = False  # set at install from NEURON_RT_ENABLE_HOST_CC

    def __new__(cls, device: int | str | torch.device | None = None, priority: int = 0, **kwargs: Any) -> Stream:
        if all(k in kwargs for k in _TRIPLE):  # S streams.py:29-35
            if kwargs["device_type"] != _DEVICE_TYPE:  # S Stream.cpp:64-65
                raise RuntimeError(f"Expected Neuron device type, got: {kwargs['device_type']}")
            self = super().__new__(cls, stream_id=kwargs["stream_id"], device_index=kwargs["device_index"],
                                   device_type=_DEVICE_TYPE)
            priority = 0  # a rebuilt stream: the simulator keeps no per-id priority (all ids share one queue)
        else:
            index = _index(device)  # S Stream.cpp:49-55
            stream_id = next(_pool) if Stream.host_cc else 0
            self = super().__new__(cls, stream_id=stream_id, device_index=index, device_type=_DEVICE_TYPE)
        self._priority = priority
        return self

    @property
    def priority(self) -> int:  # S Stream.cpp:167-175
        return self._priority

    @property
    def device(self) -> torch.device:  # S streams.py:85-88
        """The device associated with this stream."""
        return torch.device("neuron", self.device_index)

    def query(self) -> bool:
        """True: all work enqueued on the simulated device has completed."""
        return True

    def synchronize(self) -> None:
        """Wait for the stream's work (complete on enqueue in the simulator)."""

    def record_event(self, event: Event | None = None) -> Event:  # S streams.py:63-75
        if event is None:
            event = Event()
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        """Order later work on this stream after `event` (already true in the simulator)."""
        if not isinstance(event, Event):  # S Stream.cpp:102
            raise RuntimeError("Expected a Neuron event")

    def wait_stream(self, stream: Stream) -> None:
        """Record an event on `stream` and wait for it, as torch_neuronx does (S streams.py:55-61)."""
        self.wait_event(stream.record_event())

    def __enter__(self) -> Stream:
        """`with s:` selects `s` as this thread's current stream. S inherits torch.Stream's, which exchanges
        the device guard's current stream, the one S's current_stream() reads (S __init__.py:311-317)."""
        self.__dict__.setdefault("_previous", []).append(getattr(_current, "stream", None))
        _current.stream = self
        return self

    def __exit__(self, *exc: object) -> None:
        _current.stream = self._previous.pop()


class Event:
    """A marker in a stream; `elapsed_time` between two timing events is in milliseconds."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False) -> None:
        self.enable_timing = enable_timing
        self.blocking = blocking
        self._recorded_ns: int | None = None

    def record(self, stream: Stream | None = None) -> None:
        _check_stream(stream)  # S Stream.cpp:277-282 (None: the current stream)
        self._recorded_ns = time.perf_counter_ns()

    def query(self) -> bool:
        return True

    def wait(self, stream: Stream | None = None) -> None:
        """Make `stream` wait for this event (already ordered in the simulator)."""
        _check_stream(stream)  # S Stream.cpp:302-307

    def synchronize(self) -> None:
        """Wait until the event completes (complete when recorded in the simulator)."""

    def elapsed_time(self, end_event: "Event") -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Events must be created with enable_timing=True to measure elapsed time")
        if self._recorded_ns is None or end_event._recorded_ns is None:
            raise RuntimeError("Both events must be recorded before calling elapsed_time")
        return (end_event._recorded_ns - self._recorded_ns) / 1e6


def _check_stream(stream: object) -> None:
    if stream is not None and not isinstance(stream, Stream):  # S Stream.h:35-37 THNPStream_Check
        raise RuntimeError("Expected a Neuron stream")


def _index(device: int | str | torch.device | None) -> int:
    """The device index a stream is made on: the current device when None or without an index
    (S Stream.cpp:49-55); a device of another type is refused (S Stream.cpp:53)."""
    if device is None:  # this thread's current device, from the native runtime (module.current_device's)
        return native.current_device()
    if isinstance(device, int):
        return device if device >= 0 else native.current_device()  # S streams.py:20-22: negative = current
    device = torch.device(device)
    if device.type != "neuron":
        raise RuntimeError(f"Expected Neuron device, got: {device}")
    return native.current_device() if device.index is None else device.index


def default_stream(device: int | str | torch.device | None = None) -> Stream:
    """The device's stream 0 (S __init__.py:320-326)."""
    return Stream(stream_id=0, device_index=_index(device), device_type=_DEVICE_TYPE)


def current_stream(device: int | str | torch.device | None = None) -> Stream:
    return getattr(_current, "stream", None) or default_stream(device)


def set_stream(stream: Stream | None) -> None:
    if stream is None:  # S __init__.py:329-332: None changes nothing
        return
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
