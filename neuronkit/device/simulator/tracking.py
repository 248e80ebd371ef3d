"""Op tracking as the real backend keeps it: the names of ops executed on the device and of ops that
fell back to CPU (`torch_neuronx.get_executed_ops()`, `get_fallback_ops()`, `clear_op_tracking()`,
behaviour doc §2), plus observers that profiling attaches to see every op event."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from neuronkit.device.simulator import native


class OpEvent(NamedTuple):
    """One op the simulated device ran, as seen by an observer."""

    name: str  # aten::mm
    overload: str  # default
    category: str  # native, cpu_fallback, dynamic_shape, ...
    fallback: bool  # ran on the host through the CPU fallback
    start_ns: int
    duration_ns: int
    cache_key: str | None  # eager NEFF cache key; None for views and fallbacks
    cache_hit: bool
    input_shapes: tuple
    input_dtypes: tuple
    bytes_in: int  # bytes of tensor inputs (host<->device traffic for a fallback)
    bytes_out: int
    engine_estimate: Any = None  # an NKI kernel launch: its estimated engine time (neuronkit.nki.cost)


class _Observers(list):
    """The observers of every op; while there are any, the native kernel sends each op to the Python path,
    which builds the events."""

    def _changed(self) -> None:
        native.route_to_python(native.ROUTE_OBSERVERS, bool(self))

    def append(self, observer: Callable[[OpEvent], None]) -> None:
        super().append(observer)
        self._changed()

    def remove(self, observer: Callable[[OpEvent], None]) -> None:
        super().remove(observer)
        self._changed()

    def clear(self) -> None:
        super().clear()
        self._changed()


observers: list[Callable[[OpEvent], None]] = _Observers()
# Called only for ops that run while the PyTorch profiler is recording (free otherwise): how
# neuronkit.profiling sees device work inside a `torch.profiler.profile` window.
profiler_observers: list[Callable[[OpEvent], None]] = []


def get_fallback_ops() -> list[str]:
    """Ops that fell back to CPU, as a list (S: NeuronBindings.cpp:981-986), named as the boxed fallback
    names them: `aten::<name>` plus the overload when it is not the default (`aten::add.Tensor`)."""
    return native.tracked_ops(True)


def get_executed_ops() -> list[str]:
    """Ops that executed on the device, as a list (S: NeuronBindings.cpp:988-994; python_ops/base.py:826
    logs the registered op name, `aten::<name>`)."""
    return native.tracked_ops(False)


def record_executed(name: str) -> None:
    """Count `name` as executed on the device (ops that run outside the per-op kernel, e.g. NKI kernels)."""
    native.record_op(name, False)


# Input-dependent fallbacks since the last clear: a registered op whose implementations all rejected the
# call's inputs (neuronkit/preconditions.py), with the reason, by the name S logs (python_ops/base.py:820-829).
_input_fallbacks: dict[str, str] = {}


def record_input_fallback(name: str, reason: str) -> None:
    """Count `name` as fallen back to CPU because no device implementation took these inputs."""
    native.record_op(name, True)
    _input_fallbacks.setdefault(name, reason)


def get_input_fallbacks() -> dict[str, str]:
    """The registered ops that fell back to CPU for their inputs (a subset of `get_fallback_ops()`), each
    with why no device implementation took them."""
    return dict(_input_fallbacks)


def clear_op_tracking() -> None:
    """Forget the ops seen so far."""
    native.clear_tracking()
    _input_fallbacks.clear()
