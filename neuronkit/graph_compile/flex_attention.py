"""FlexAttention under `torch.compile(backend="neuron")`: the higher-order op legalized into ATen ops.

torch-mlir has no importer for the `flex_attention` higher-order op, so S's backend rewrites it before lowering
(S: torch_neuronx/neuron_dynamo_backend/fx/passes/flex_attention_legalization.py:33-50, run by
fx/pipelines/post_aot_processing_pipeline.py:46): scores `q @ k^T * scale`, the score_mod and mask_mod
subgraphs applied over (batch, head, q_idx, kv_idx), GQA heads repeated, softmax, `@ v`, and the logsumexp
the backward needs. Here the op's node in the Dynamo graph is replaced, before AOTAutograd, by PyTorch's own
dense implementation of the same computation (`sdpa_dense`), so AOTAutograd traces it into ATen ops for the
forward and backward graphs, which the backend then checks and records as any other.

Eager FlexAttention is refused by PyTorch's device check (`_validate_device`) on the real device and here
alike, also under compile, where Dynamo traces the check. That is the client's to change, not the device's:
S's GPT-OSS example patches `torch.nn.attention.flex_attention._validate_device` to let `neuron` tensors
through (examples/torch_compile/models/gpt_oss/attention.py:17-26), and so must a user here.
"""

from __future__ import annotations

import torch
from torch._higher_order_ops.flex_attention import flex_attention as flex_attention_hop
from torch._higher_order_ops.flex_attention import sdpa_dense


def dense(*args: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The `flex_attention` op's arguments in, its (output, logsumexp, max score) out, as ATen ops."""
    return sdpa_dense(*args)


def legalize(gm: torch.fx.GraphModule) -> int:
    """Replace every `flex_attention` node of `gm` with its dense ATen computation; how many were replaced."""
    nodes = gm.graph.find_nodes(op="call_function", target=flex_attention_hop)
    for node in nodes:
        node.target = dense
    if nodes:
        gm.recompile()
    return len(nodes)

