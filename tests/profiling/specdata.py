"""Tiny models, a word tokenizer and a fake clock for the speculative-decoding tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from profiling.results import DecodePoint, Samples

EOS = 2


class FakeClock:
    """Runs the function and says every call took `seconds`."""

    def __init__(self, seconds: float = 0.01) -> None:
        self.seconds = seconds

    def time(self, fn: Callable[[], Any]) -> float:
        fn()
        return self.seconds


def word_tokenizer(words: list[str], eos: str = "</s>") -> PreTrainedTokenizerFast:
    vocab = {"<unk>": 0, "<s>": 1, eos: EOS, **{w: i + 3 for i, w in enumerate(words)}}
    model = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    model.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=model, unk_token="<unk>", bos_token="<s>", eos_token=eos
    )


def tiny_llama(layers: int, seed: int, vocab: int = 96) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=EOS,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # sharper logits: no near-ties for float rounding to flip
        model.lm_head.weight.mul_(20)
    return model


def tiny_family() -> dict[str, Any]:
    """Two random tiny Llamas (target and draft) and three prompts with repeats."""
    generator = torch.Generator().manual_seed(3)
    # Repeated phrases give prompt lookup something to find.
    prompts = [torch.randint(3, 96, (n,), generator=generator).tolist() for n in (5, 11, 17)]
    prompts[2] = prompts[2] + prompts[2][:6]
    return {"target": tiny_llama(2, 0), "draft": tiny_llama(1, 1), "prompts": prompts}


def decode_point(batch: int, context: int, seconds: float) -> DecodePoint:
    """A measured decode step, as the baseline records it (every sample `seconds`)."""
    return DecodePoint(
        batch_size=batch, context_tokens=context, seconds_per_token=Samples([seconds] * 3),
        tokens_per_second=batch / seconds, bytes_per_step=1.0, achieved_bytes_per_second=1.0,
    )  # fmt: skip
