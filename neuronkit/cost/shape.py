"""What the cost model needs to know of a model: its parameters by kind and its attention's shape.

Counted, not modelled: the checkpoint's own class is built from its config with one layer on the meta
device (nothing allocated), and its parameters are summed by where they sit: input embeddings, one layer
(of which the matrices a tensor-parallel plan splits), the head, the rest. The full model is the rest plus
`layers` copies of the layer. Attention's shape (heads, key/value heads, head size) comes from the config.
"""

from __future__ import annotations

from dataclasses import dataclass

import math

import torch
from transformers import PretrainedConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from neuronkit import models, slicing
from neuronkit.errors import NeuronkitInputError
from neuronkit.planner.probe import PLANNED_TASKS, TP_SPLIT, layer_stack


@dataclass(frozen=True, slots=True)
class ModelShape:
    """Parameter counts by kind and attention geometry of one model (counts, not bytes)."""

    name: str
    causal: bool  # decoder (causal attention, generates) or encoder (bidirectional, no decode)
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    embedding: int  # input embeddings (the first pipeline stage; a lookup, no FLOPs)
    head: int  # output projection parameters held apart from the embeddings (0 when tied)
    other: int  # final norm and anything else outside the layers and embeddings
    layer: int  # one layer's parameters, of which:
    layer_qo: int  # query and output projections (split by query head)
    layer_kv: int  # key and value projections (split by key/value head)
    layer_mlp: int  # the MLP matrices tensor parallel splits (gate/up/down)
    layer_experts: int  # a mixture of experts' matrices, split by tensor parallel like the MLP's
    layer_dense: int  # other matrices, kept whole on every tp rank (routers, layers without a TP plan)
    expert_share: float  # of `layer_experts`, the part one token passes through (top-k of E experts)
    layer_io: int  # elements per token its matrices read and write (inputs and outputs), active experts only
    max_positions: int | None = None  # the longest sequence its position embeddings cover (None: no limit named)

    @property
    def parameters(self) -> int:
        return self.embedding + self.head + self.other + self.layers * self.layer

    def beyond_positions(self, tokens: int, what: str) -> list[str]:
        """A note when `tokens` pass the model's position limit: the time is counted (AWS's own serving rows
        run Llama-2 past its 4,096 positions); whether the model was trained for that length is not known."""
        problem = models.too_long(self.max_positions, tokens, what)
        return [f"{problem}: the estimate counts the time; whether the model works at that length is not known"] \
            if problem else []

    @property
    def splittable(self) -> bool:
        """Whether a tensor-parallel plan splits its layers (Llama-style q/k/v/o projections, and gate/up/down
        or experts)."""
        return self.layer_qo > 0 and (self.layer_mlp > 0 or self.layer_experts > 0)

    def query_heads(self, tp: int) -> int:
        """Query heads on one of `tp` ranks: padded up when tp does not divide them (NxD's pad_model)."""
        return math.ceil(self.heads / tp)

    def kv_heads_per_rank(self, tp: int) -> int:
        """Key/value heads on one of `tp` ranks: replicated when tp exceeds them, padded when it does not
        divide them."""
        return math.ceil(self.kv_heads / tp)

    def rank_layer(self, tp: int, *, active: bool = False) -> float:
        """One layer's parameters on one of `tp` ranks (`active`: only those a token multiplies by)."""
        attention = (self.layer_qo * self.query_heads(tp) / self.heads
                     + self.layer_kv * self.kv_heads_per_rank(tp) / self.kv_heads)
        experts = self.layer_experts * (self.expert_share if active else 1.0)
        vectors = 0 if active else (self.layer - self.layer_qo - self.layer_kv - self.layer_mlp - self.layer_experts
                                    - self.layer_dense)
        return attention + (self.layer_mlp + experts) / tp + self.layer_dense + vectors

    def forward_flops(self, tokens: float, context: float, *, logits: float | None = None, tp: int = 1) -> float:
        """FLOPs of a forward on one of `tp` ranks over `tokens` tokens that each attend to `context`
        positions on average: 2 per multiply-accumulate of every layer matrix (attention heads padded or
        replicated as `rank_layer` says), QKᵀ and AV (4·head_dim per position per query head), and the LM
        head over `logits` tokens (default: all of them). tp=1 gives the model's own FLOPs."""
        attention = 4 * self.query_heads(tp) * self.head_dim * context
        per_token = self.layers * (2 * self.rank_layer(tp, active=True) + attention)
        return tokens * per_token + 2 * self.hidden * self.vocab / tp * (tokens if logits is None else logits)

    def kv_bytes_per_token(self, nbytes: int, tp: int = 1) -> float:
        """Key and value cache bytes per token on one of `tp` ranks."""
        return 2 * self.layers * self.kv_heads_per_rank(tp) * self.head_dim * nbytes


def model_shape(spec: models.ModelSpec) -> ModelShape:
    """The shape of the model `spec` names (a checkpoint directory, config.json, bundled name or config)."""
    config = models.load_config(spec)
    name = str(spec) if not isinstance(spec, PretrainedConfig) else config.model_type
    return _count(config, name)


def _count(config: PretrainedConfig, name: str) -> ModelShape:
    text = config.get_text_config()
    layers = getattr(text, "num_hidden_layers", None)
    if not isinstance(layers, int) or layers < 1:
        raise NeuronkitInputError(f"cannot estimate {name}: its config has no num_hidden_layers (the cost model "
                                  "covers decoder and encoder stacks)")
    task = models.task_of(config)
    # An encoder-decoder's num_hidden_layers is its encoder's alone (BART's masked-LM head included): its
    # decoder stack would go uncounted.
    # A vision-language or CLIP-style model's towers beside its text stack would go uncounted too.
    tower = next((key.split("_")[0] for key in ("vision_config", "audio_config") if getattr(config, key, None)), None)
    if config.is_encoder_decoder or tower or task not in (*PLANNED_TASKS, "base"):
        what = "an encoder-decoder model" if config.is_encoder_decoder else \
            f"a model with {'an' if tower == 'audio' else 'a'} {tower} tower" if tower else \
            "a model outside transformers' task mappings" if task == "other" else task
        raise NeuronkitInputError(
            f"cannot estimate {config.architectures[0] if config.architectures else config.model_type}: the cost "
            f"model covers causal and masked language models and their base stacks, not {what}")
    with torch.device("meta"):
        model = models.build(models.model_class(config), slicing.sliced_config(config, 1))
    stack = layer_stack(model)
    layer = stack[0]
    embedding_module = model.get_input_embeddings()
    head_module = model.get_output_embeddings()
    seen: set[int] = set()

    def total(module: torch.nn.Module) -> int:
        count = 0
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                count += p.numel()
        return count

    embedding = total(embedding_module)
    one_layer = total(layer)
    head = total(head_module) if head_module is not None else 0
    everything = sum(p.numel() for p in model.parameters())
    other = everything - embedding - one_layer - head
    counts = {"qo": 0, "kv": 0, "mlp": 0, "experts": 0, "dense": 0}
    io = 0.0
    experts = _active_expert_share(text)
    for pname, p in layer.named_parameters():
        if p.dim() < 2:
            continue
        owner = pname.rsplit(".", 2)[-2] if pname.count(".") else ""
        kind = ("qo" if owner in ("q_proj", "o_proj") else "kv" if owner in ("k_proj", "v_proj")
                else "experts" if "expert" in pname else "mlp" if owner in TP_SPLIT else "dense")
        counts[kind] += p.numel()
        share = experts if "expert" in pname else 1.0
        io += (p.shape[-1] + p.shape[-2]) * share * (p.shape[0] if p.dim() == 3 else 1)
    heads = getattr(text, "num_attention_heads", None) or 1
    hidden = getattr(text, "hidden_size", None) or 0
    return ModelShape(
        name=name, layers=layers,
        causal=task == "causal_lm" or (task == "base" and config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
        hidden=hidden, heads=heads, kv_heads=getattr(text, "num_key_value_heads", None) or heads,
        head_dim=getattr(text, "head_dim", None) or (hidden // heads if heads else 0),
        vocab=getattr(text, "vocab_size", 0) or 0, embedding=embedding, head=head, other=other, layer=one_layer,
        layer_qo=counts["qo"], layer_kv=counts["kv"], layer_mlp=counts["mlp"], layer_experts=counts["experts"],
        layer_dense=counts["dense"], expert_share=experts, layer_io=int(io), max_positions=models.max_positions(config))


def _active_expert_share(config: PretrainedConfig) -> float:
    """The share of a mixture-of-experts layer's expert weights one token passes through (top-k of E)."""
    experts = next((getattr(config, k) for k in ("num_local_experts", "num_experts", "n_routed_experts")
                    if isinstance(getattr(config, k, None), int)), None)
    top = next((getattr(config, k) for k in ("num_experts_per_tok", "moe_topk", "top_k")
                if isinstance(getattr(config, k, None), int)), None)
    return top / experts if experts and top else 1.0
