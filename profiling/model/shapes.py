"""A model's shapes, read from its transformers config: parameters, weight and KV-cache
bytes, and the FLOPs and bytes of a prefill or a decode step.

No torch import, and nothing above it in the library: the estimate, the stored
result and the advice all read shapes from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1, "float8": 1, "int4": 0.5}


@dataclass(frozen=True)
class Shapes:
    """What the estimate needs of a model, read from its transformers config."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    num_experts: int = 0  # 0: a dense MLP
    experts_per_token: int = 0
    moe_intermediate_size: int = 0

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Shapes:
        text = config.get("text_config") or config
        heads = int(text["num_attention_heads"])
        hidden = int(text["hidden_size"])
        experts = int(text.get("num_local_experts") or text.get("num_experts") or 0)
        return cls(
            num_layers=int(text["num_hidden_layers"]),
            hidden_size=hidden,
            num_attention_heads=heads,
            num_key_value_heads=int(text.get("num_key_value_heads") or heads),
            head_dim=int(text.get("head_dim") or hidden // heads),
            intermediate_size=int(text.get("intermediate_size") or 4 * hidden),
            vocab_size=int(text["vocab_size"]),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            num_experts=experts,
            experts_per_token=int(text.get("num_experts_per_tok") or (1 if experts else 0)),
            moe_intermediate_size=int(
                text.get("moe_intermediate_size") or text.get("intermediate_size") or 0
            ),
        )

    @cached_property
    def attention_params(self) -> int:
        q_and_o = 2 * self.hidden_size * self.num_attention_heads * self.head_dim
        k_and_v = 2 * self.hidden_size * self.num_key_value_heads * self.head_dim
        return q_and_o + k_and_v

    def _mlp_params(self, experts: int) -> int:
        if not self.num_experts:
            return 3 * self.hidden_size * self.intermediate_size  # gate, up, down
        router = self.hidden_size * self.num_experts
        return experts * 3 * self.hidden_size * self.moe_intermediate_size + router

    @cached_property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @cached_property
    def head_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @cached_property
    def body_params(self) -> int:
        """Every decoder weight (norms included), all experts: what memory holds."""
        norms = 2 * self.hidden_size
        layer = self.attention_params + self._mlp_params(self.num_experts or 1) + norms
        return self.num_layers * layer + self.hidden_size

    @cached_property
    def active_body_params(self) -> int:
        """Decoder weights one token passes through (the routed experts only)."""
        if not self.num_experts:
            return self.body_params
        layer = self.attention_params + self._mlp_params(self.experts_per_token)
        return self.num_layers * (layer + 2 * self.hidden_size) + self.hidden_size

    @cached_property
    def total_params(self) -> int:
        head = 0 if self.tie_word_embeddings else self.head_params
        return self.body_params + self.embedding_params + head

    @cached_property
    def edge_params(self) -> int:
        """The token embeddings and the LM head (once when tied): what quantized
        checkpoints keep in 16 bits."""
        return self.total_params - self.body_params

    def weights_bytes(self, dtype: str) -> int:
        """Every weight in `dtype`; a format below 16 bits keeps the embedding and the
        LM head in 16 bits, as quantized checkpoints do."""
        return _weights_bytes(self, dtype)

    def kv_bytes_per_token(self, dtype: str) -> int:
        return _kv_bytes_per_token(self, dtype)

    def prefill_activation_bytes(self, dtype: str, tokens: int, rows: int, devices: int = 1) -> int:
        """The activation peak of one forward over `tokens` prompt tokens from `rows`
        sequences, per tensor-parallel shard of `devices` (estimated: the textbook
        tensors, in the 16-bit `dtype` activations of any weight format): the residual
        stream and its normed copy, whole on every shard; the larger of attention's
        projections (q, k, v, the output) and the MLP's (gate and up, their product;
        each token's routed copies in a mixture), split over the shards; and the
        float32 logits of the `rows` sampled positions, gathered whole."""
        q = self.num_attention_heads * self.head_dim
        attention = 2 * q + 2 * self.num_key_value_heads * self.head_dim
        if self.num_experts:
            k = self.experts_per_token
            mlp = k * (3 * self.moe_intermediate_size + self.hidden_size)
        else:
            mlp = 3 * self.intermediate_size
        per_token = 2 * self.hidden_size + max(attention, mlp) / max(1, devices)
        logits = rows * self.vocab_size * 4
        return math.ceil(tokens * per_token * DTYPE_BYTES[dtype] + logits)

    def prefill_flops(self, tokens: int, batch: int) -> float:
        """As the baseline counts them: body once per token, LM head for the last token."""
        return batch * self.chunk_flops(tokens, 0)

    def chunk_flops(self, tokens: int, offset: float) -> float:
        """A prompt chunk of `tokens` after `offset` tokens already cached: body once per
        token, attention to the cache and within the chunk, LM head for the last token."""
        heads = self.num_attention_heads * self.head_dim
        attention = 4 * self.num_layers * heads * tokens * (offset + tokens / 2)
        return float(2 * self.active_body_params * tokens + 2 * self.head_params + attention)

    def decode_flops(self, batch: int, context: int) -> float:
        heads = self.num_attention_heads * self.head_dim
        attention = 4 * self.num_layers * heads * context
        return float(batch * (2 * (self.active_body_params + self.head_params) + attention))

    def experts_touched(self, batch: int) -> float:
        """Experts a decode step reads per layer: each of `batch` rows routes to
        `experts_per_token` of `num_experts`; with routing spread evenly, the expected
        number of distinct experts is E × (1 − (1 − k/E)^batch)."""
        if not self.num_experts:
            return 0.0
        k, e = self.experts_per_token, self.num_experts
        return e * (1 - (1 - k / e) ** max(1, batch))

    def decode_bytes(self, dtype: str, batch: int, context: int) -> float:
        """Weights read once per step, plus every row's KV cache. A mixture of experts
        reads only the experts its rows route to (two of Mixtral's eight for one
        request; nearly all of them for a batch of 16)."""
        return self.weights_read(dtype, batch) + self.kv_bytes_per_token(dtype) * batch * context

    def weights_read(self, dtype: str, batch: int) -> float:
        """Weight bytes one step over `batch` rows reads."""
        weights = float(self.weights_bytes(dtype))
        if self.num_experts:
            unread = self.num_experts - self.experts_touched(batch)
            weights -= self.num_layers * unread * self.expert_bytes(dtype)
        return weights

    def expert_bytes(self, dtype: str) -> float:
        """One expert's weights (gate, up, down) in one layer; 0 for a dense model."""
        if not self.num_experts:
            return 0.0
        return 3 * self.hidden_size * self.moe_intermediate_size * DTYPE_BYTES[dtype]

    def experts_weights_bytes(self, dtype: str) -> float:
        """Every expert of every layer; 0 for a dense model."""
        return self.num_layers * self.num_experts * self.expert_bytes(dtype)

    def shared_weights_bytes(self, dtype: str) -> float:
        """Every weight but the experts': what each expert-parallel rank holds whole."""
        return self.weights_bytes(dtype) - self.experts_weights_bytes(dtype)


def shapes_or_none(model_config: dict[str, Any]) -> Shapes | None:
    """The model's `Shapes`, or None where its config lacks what they read."""
    try:
        return Shapes.from_config(model_config)
    except (KeyError, ValueError, TypeError):
        return None


# The simulated engine asks for these every step; a model's shapes never change.
@lru_cache(maxsize=1024)
def _weights_bytes(shapes: Shapes, dtype: str) -> int:
    per = DTYPE_BYTES[dtype]
    if per >= 2:
        return math.ceil(shapes.total_params * per)
    return math.ceil(shapes.body_params * per + shapes.edge_params * 2)


@lru_cache(maxsize=1024)
def _kv_bytes_per_token(shapes: Shapes, dtype: str) -> int:
    per_layer = 2 * shapes.num_key_value_heads * shapes.head_dim
    return math.ceil(shapes.num_layers * per_layer * DTYPE_BYTES[dtype])
