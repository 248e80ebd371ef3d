"""Records of the graphs the `neuron` torch.compile backend compiled (`torch.neuron.get_dynamo_metrics()`;
behaviour doc §3: graph_id, graph_name, model_name, graph_node_count, timings)."""

from typing import Any

METRICS: list[dict[str, Any]] = []

in_compiled_graph: bool = False
"""True while a compiled graph runs: the graph is one NEFF, so the kernel compiles no per-op eager NEFFs."""
