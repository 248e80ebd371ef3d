"""Records of the graphs the `neuron` torch.compile backend compiled (`torch.neuron.get_dynamo_metrics()`;
behaviour doc §3: graph_id, graph_name, model_name, graph_node_count, timings)."""

from typing import Any

METRICS: list[dict[str, Any]] = []
