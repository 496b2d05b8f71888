"""What was loaded: the model's description a profile stores (`Profile.model`).

No torch import: the site reads it with the rest of a stored result.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling.model.shapes import Shapes


@dataclass
class ModelInfo:
    """What was loaded, and whether its weights are real."""

    name: str
    source: str  # "demo", "hub", "local", "config"
    architecture: str
    config_only: bool  # random weights: valid for memory and time only
    num_parameters: int
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int | None = None
    max_position_embeddings: int | None = None
    revision: str | None = None
    # What an analytic estimate needs of the model (tied head, experts): set beside the
    # advice, so a stored result can be projected again without the model's config.
    # None in results written before it existed.
    shapes: Shapes | None = None
