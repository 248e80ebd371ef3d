"""Records of the graphs the `neuron` torch.compile backend compiled (`torch.neuron.get_dynamo_metrics()`;
behaviour doc §3: graph_id, graph_name, model_name, graph_node_count, timings)."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from neuronkit.device.simulator import native

METRICS: list[dict[str, Any]] = []

in_compiled_graph: bool = False
"""True while a compiled graph runs: the graph is one NEFF, so the kernel compiles no per-op eager NEFFs."""


@contextmanager
def running() -> Iterator[None]:
    """Mark a compiled graph's run (nested runs keep the outer mark); its ops take the Python path, which
    neither counts them as eager NEFFs nor records host fallbacks."""
    global in_compiled_graph
    outer = in_compiled_graph
    in_compiled_graph = True
    native.route_to_python(native.ROUTE_COMPILED_GRAPH, True)
    try:
        yield
    finally:
        in_compiled_graph = outer
        native.route_to_python(native.ROUTE_COMPILED_GRAPH, outer)
