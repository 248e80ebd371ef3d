"""Records of the graphs the `neuron` torch.compile backend compiled (`torch.neuron.get_dynamo_metrics()`;
behaviour doc §3: graph_id, graph_name, model_name, graph_node_count, timings)."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from neuronkit import env
from neuronkit.device.simulator import native
from neuronkit.policy import torch_at_least

COMPLEX_DECOMPOSE_VAR = "TORCH_NEURONX_COMPLEX_DECOMPOSE"
COMPLEX_DECOMPOSE_DEFAULT_FROM = (2, 13)  # the env-vars page: "PyTorch >= 2.13: True"

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


def complex_decompose(version: str = torch.__version__) -> bool:
    """TORCH_NEURONX_COMPLEX_DECOMPOSE, as the public beta documents it (env-vars page, 2026-10-14; newer than
    S, which lacks it): the compile path decomposes complex ops into real ones before lowering, on by default
    for PyTorch >= 2.13 (off before); "0"/"false" turns it off. Eager mode is unaffected."""
    return env.flag(COMPLEX_DECOMPOSE_VAR, torch_at_least(version, COMPLEX_DECOMPOSE_DEFAULT_FROM), false=env.FALSE_WORDS)
