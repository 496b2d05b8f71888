"""The tiny random Llama the profiling tests measure (GQA: 4 heads, 2 KV heads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def tiny_llama_config(max_positions: int = 512, **overrides: Any) -> Any:
    from transformers import LlamaConfig

    shape = dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=max_positions,
    )
    return LlamaConfig(**{**shape, **overrides})


def save_tiny_llama_dir(path: Path, max_positions: int = 512) -> Path:
    """A local model directory (config.json + safetensors) with random weights."""
    from transformers import LlamaForCausalLM

    path.mkdir(parents=True, exist_ok=True)
    LlamaForCausalLM(tiny_llama_config(max_positions)).save_pretrained(path)
    return path
