"""A model's shapes: parameters, weight and KV-cache bytes, and the FLOPs and bytes of a
prefill or a decode step, all from its sizing (`profiling.model.sizing`: transformers'
own class for the config, counted on the meta device, and the checkpoint's format).

No torch import at module level, and nothing above it in the library: the estimate,
the stored result and the advice all read shapes from here. Sizing a config the first
time imports torch; a stored result carries its sizing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import cached_property, lru_cache
from typing import Any

from profiling.model.sizing import Checkpoint, Sizing, SizingError, size_config

__all__ = ["CHECKPOINT", "DTYPE_BYTES", "Shapes", "SizingError", "shapes_or_none"]

# Bytes per parameter (per cached element for the KV formats). "fp4" is NVFP4's: 4 bits
# and an 8-bit scale per 16 values.
DTYPE_BYTES = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "int8": 1,
    "float8": 1,
    "int4": 0.5,
    "fp4": 4.5 / 8,
}
# The weights as the checkpoint stores them (its `quantization_config`): sized per model.
CHECKPOINT = "checkpoint"
# A state layer's state per sequence: in the model's 16-bit dtype (vLLM's
# mamba_cache_dtype "auto").
STATE_BYTES = 2


@dataclass(frozen=True)
class Shapes:
    """What the estimate needs of a model: its config's dimensions, and its parameters
    by role as transformers' own class for the config holds them (`sizing`)."""

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
    # The model counted from its class on the meta device; None in results written
    # before it existed, whose dense (or Mixtral-style) shapes are then sized from a
    # config rebuilt from the fields above.
    sizing: Sizing | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Shapes:
        """The shapes of a transformers config dict; `SizingError` (a ValueError) names
        what cannot be sized."""
        sizing = size_config(config)
        text = config.get("text_config") or config
        heads = int(text["num_attention_heads"])
        hidden = int(text["hidden_size"])
        return cls(
            num_layers=int(text["num_hidden_layers"]),
            hidden_size=hidden,
            num_attention_heads=heads,
            num_key_value_heads=int(text.get("num_key_value_heads") or heads),
            head_dim=int(text.get("head_dim") or hidden // heads),
            intermediate_size=int(text.get("intermediate_size") or 4 * hidden),
            vocab_size=int(text["vocab_size"]),
            tie_word_embeddings=bool(config.get("tie_word_embeddings",
                                                text.get("tie_word_embeddings", False))),
            num_experts=sizing.experts,
            experts_per_token=sizing.experts_per_token,
            moe_intermediate_size=int(
                text.get("moe_intermediate_size") or text.get("intermediate_size") or 0
            ),
            sizing=sizing,
        )  # fmt: skip

    def as_config(self) -> dict[str, Any]:
        """A Llama (or Mixtral, with experts) config of these shapes: how shapes stored
        without a sizing are sized."""
        config: dict[str, Any] = {
            "model_type": "mixtral" if self.num_experts else "llama",
            "architectures": ["MixtralForCausalLM" if self.num_experts else "LlamaForCausalLM"],
            "num_hidden_layers": self.num_layers, "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads, "head_dim": self.head_dim,
            "intermediate_size": self.moe_intermediate_size if self.num_experts
            else self.intermediate_size,
            "vocab_size": self.vocab_size, "tie_word_embeddings": self.tie_word_embeddings,
        }  # fmt: skip
        if self.num_experts:
            config.update(num_local_experts=self.num_experts,
                          num_experts_per_tok=self.experts_per_token)  # fmt: skip
        return config

    def __hash__(self) -> int:
        # The simulated engine hashes shapes for its caches every step: once is enough.
        return self._hash

    @cached_property
    def _hash(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in fields(self)))

    @cached_property
    def sized(self) -> Sizing:
        return self.sizing if self.sizing is not None else size_config(self.as_config())

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The checkpoint's own quantized format, if it ships one."""
        return self.sized.checkpoint

    @cached_property
    def attention_params(self) -> int:
        """One layer's attention weights (the mean over the decoder's layers)."""
        return self.sized.attention // max(1, self.num_layers)

    @cached_property
    def embedding_params(self) -> int:
        return self.sized.embedding

    @cached_property
    def head_params(self) -> int:
        """The LM head's multiply (vocab × hidden), whether or not it is tied."""
        return self.sized.vocab_size * self.sized.hidden_size

    @cached_property
    def body_params(self) -> int:
        """Every weight but the embedding and the LM head, all experts: what memory holds."""
        return self.sized.body_params

    @cached_property
    def active_body_params(self) -> float:
        """Weights one token passes through beside the embedding and the head: the routed
        experts it goes to, shared experts and dense layers always."""
        return self.sized.active_params - self.sized.edge_params

    @cached_property
    def total_params(self) -> int:
        return self.sized.total_params

    @cached_property
    def edge_params(self) -> int:
        """The token embeddings and the LM head (once when tied): what quantized
        checkpoints keep in 16 bits."""
        return self.sized.edge_params

    def weights_bytes(self, dtype: str) -> int:
        """Every weight in `dtype` ("checkpoint": as the checkpoint stores them, scales
        included); a format below 16 bits keeps the embedding and the LM head in 16
        bits, as quantized checkpoints do."""
        return _weights_bytes(self, dtype)

    def bytes_per_param(self, dtype: str) -> float:
        return self.weights_bytes(dtype) / max(1, self.total_params)

    def kv_bytes_per_token(self, dtype: str, context: float | None = None, devices: int = 1) -> int:
        """KV-cache bytes per token of context over the whole deployment. Without a
        `context`, below any window: every attention layer's K and V (MLA's latent);
        with one, the mean per token of a sequence that long (window layers capped at
        their window, state layers' fixed state spread over it). MLA's latent is whole
        on each of `devices` tensor-parallel ranks, so it counts `devices` times."""
        return _kv_bytes_per_token(self, dtype, context, devices)

    def kv_bytes(self, dtype: str, tokens: float) -> float:
        """One sequence's cache at `tokens` of context, on one device holding it whole."""
        s, per = self.sized, _kv_element_bytes(dtype)
        windowed = s.window_layers * min(tokens, s.window) if s.window else 0
        attention = (s.full_layers * tokens + windowed) * s.kv_elements * per
        return attention + s.state_elements * STATE_BYTES

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
        return math.ceil(tokens * per_token * DTYPE_BYTES.get(dtype, 2) + logits)

    def prefill_flops(self, tokens: int, batch: int) -> float:
        """As the baseline counts them: body once per token, LM head for the last token."""
        return batch * self.chunk_flops(tokens, 0)

    def _attention_flops(self, tokens: float, context: float, decode: bool = False) -> float:
        """Score and value products of `tokens` new tokens each seeing `context` tokens
        (window layers at most their window; state layers none counted); a decode step's
        at its own width where it differs (MLA attends over the latent)."""
        s = self.sized
        windowed = s.window_layers * min(context, s.window) if s.window else 0
        seen = s.full_layers * context + windowed
        width = s.decode_attention_width if decode and s.decode_attention_width else \
            s.attention_width  # fmt: skip
        return 4.0 * width * tokens * seen

    def chunk_flops(self, tokens: int, offset: float) -> float:
        """A prompt chunk of `tokens` after `offset` tokens already cached: body once per
        token, attention to the cache and within the chunk, LM head for the last token."""
        attention = self._attention_flops(tokens, offset + tokens / 2)
        return float(2 * self.active_body_params * tokens + 2 * self.head_params + attention)

    def decode_flops(self, batch: int, context: int) -> float:
        attention = self._attention_flops(1, context, decode=True)
        return float(batch * (2 * (self.active_body_params + self.head_params) + attention))

    def experts_touched(self, batch: int) -> float:
        """Experts a decode step reads per MoE layer: each of `batch` rows routes to
        `experts_per_token` of `num_experts`; with routing spread evenly, the expected
        number of distinct experts is E × (1 − (1 − k/E)^batch)."""
        if not self.sized.experts:
            return 0.0
        k, e = self.sized.experts_per_token, self.sized.experts
        return e * (1 - (1 - k / e) ** max(1, batch))

    def decode_bytes(self, dtype: str, batch: int, context: int) -> float:
        """Weights read once per step, plus every row's KV cache. A mixture of experts
        reads only the experts its rows route to (two of Mixtral's eight for one
        request; nearly all of them for a batch of 16)."""
        kv = self.kv_bytes_per_token(dtype, context) * batch * context
        return self.weights_read(dtype, batch) + kv

    def weights_read(self, dtype: str, batch: int) -> float:
        """Weight bytes one step over `batch` rows reads: every MoE layer's untouched
        experts skipped, the vision tower never read."""
        return _weights_read(self, dtype, batch)

    def expert_bytes(self, dtype: str) -> float:
        """One routed expert's weights in one layer; 0 for a dense model."""
        if not self.sized.experts:
            return 0.0
        if dtype == CHECKPOINT:
            return self.sized.checkpoint_expert_bytes()
        return self.sized.expert_params * DTYPE_BYTES[dtype]

    def experts_weights_bytes(self, dtype: str) -> float:
        """Every routed expert of every layer; 0 for a dense model."""
        return self.sized.moe_layers * self.sized.experts * self.expert_bytes(dtype)

    def shared_weights_bytes(self, dtype: str) -> float:
        """Every weight but the routed experts': what each expert-parallel rank holds whole."""
        return self.weights_bytes(dtype) - self.experts_weights_bytes(dtype)


def shapes_or_none(model_config: dict[str, Any]) -> Shapes | None:
    """The model's `Shapes`, or None where its config lacks what they read."""
    try:
        return Shapes.from_config(model_config)
    except (KeyError, ValueError, TypeError):  # SizingError is a ValueError
        return None


# The simulated engine asks for these every step; a model's shapes never change.
@lru_cache(maxsize=1024)
def _weights_bytes(shapes: Shapes, dtype: str) -> int:
    s = shapes.sized
    if dtype == CHECKPOINT:
        return math.ceil(s.checkpoint_bytes())
    per = DTYPE_BYTES[dtype]
    if per >= 2:
        return math.ceil(s.total_params * per)
    return math.ceil(s.body_params * per + s.edge_params * 2)


@lru_cache(maxsize=8192)
def _weights_read(shapes: Shapes, dtype: str, batch: int) -> float:
    s = shapes.sized
    unused = s.vision * min(2.0, shapes.bytes_per_param(dtype))  # held, never read
    weights = float(shapes.weights_bytes(dtype)) - unused
    if s.experts:
        unread = s.experts - shapes.experts_touched(batch)
        weights -= s.moe_layers * unread * shapes.expert_bytes(dtype)
    return weights


def _kv_element_bytes(dtype: str) -> float:
    # A quantized checkpoint's cache is 16-bit unless a KV format is chosen apart.
    return DTYPE_BYTES.get(dtype, 2) if dtype != CHECKPOINT else 2


@lru_cache(maxsize=4096)
def _kv_bytes_per_token(shapes: Shapes, dtype: str, context: float | None, devices: int) -> int:
    s = shapes.sized
    copies = devices if s.kv_replicated else 1
    if context is None or context <= 0:
        layers = s.full_layers + s.window_layers
        return math.ceil(layers * s.kv_elements * _kv_element_bytes(dtype) * copies)
    return math.ceil(shapes.kv_bytes(dtype, context) / context * copies)
