"""Timing prefills with a reused prefix cache against cold ones, and checking outputs.

A prefix is prefilled once into a `DynamicCache`. For each sample, one
prompt (the prefix plus a different ending each time) is prefilled cold into
an empty cache, then warm: only its ending, into a copy of the prefix cache.
The copy is made outside the timed region (a server would reference the
cached blocks, not copy them), and warm and cold alternate sample by sample
so drifting load from other processes hits both alike. Forwards compute
logits for the last token only, as a server does before sampling the first.

The outputs check runs `generate` greedily from the same prompt cold and
with a copy of the prefix cache (which then prefills only the ending), and
compares the tokens and, for the steps where the tokens agree, the logits.

Callers run everything under `torch.inference_mode()`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from profiling.measure.numerics import is_strict, logit_tolerance
from profiling.measure.timing import Clock
from profiling.model.memory import cache_bytes
from profiling.results import Samples

# Logits may differ by float rounding (a shorter forward sums in another
# order); relative to the largest logit magnitude, and looser for 16-bit types.


@dataclass
class Timed:
    cold: Samples
    warm: Samples
    warm_to_cold: float  # warm median / cold median: the same figures the report prints


@dataclass
class Check:
    tokens_match: bool
    max_abs_logit_diff: float
    logits_match: bool
    greedy_tokens: int
    strict: bool = True  # float32/64: the tokens must be identical too
    first_divergence: int | None = None  # the first generated token that differs

    @property
    def outputs_match(self) -> bool:
        """Logits within tolerance up to and at the first differing step; in half
        precision a token flipped there is a near tie within rounding (numerics)."""
        return self.logits_match and (self.tokens_match or not self.strict)


def new_cache(model: Any) -> Any:
    return DynamicCache(config=model.config)


def forward(model: Any, ids: Any, cache: Any) -> Any:
    """One prefill of `ids` after what `cache` holds; returns last-token logits."""
    return model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits


def prefill(model: Any, ids: Any, cache: Any | None = None) -> Any:
    """A cache holding `ids` (after what `cache` already held, which is left alone)."""
    work = copy.deepcopy(cache) if cache is not None else new_cache(model)
    if ids.shape[-1]:
        forward(model, ids, work)
    return work


def held_bytes(cache: Any) -> int:
    return cache_bytes(cache)


def time_reuse(
    model: Any,
    prefix_cache: Any,
    prefix: Any,
    endings: list[Any],
    *,
    clock: Clock,
    warmup: int,
    repeats: int,
) -> Timed:
    """Cold prefill of prefix + ending against warm prefill of the ending alone,
    interleaved sample by sample (which one runs first alternates).

    `endings` holds one ending per sample (warm-ups first); each is a [1, n]
    id tensor. `prefix_cache` holds `prefix` (a [1, p] tensor, p may be 0).
    """
    if len(endings) < warmup + repeats:
        raise ValueError("time_reuse needs one ending per warm-up and repeat")
    cold_s: list[float] = []
    warm_s: list[float] = []
    for i, ending in enumerate(endings[: warmup + repeats]):
        full, empty = torch.cat([prefix, ending], dim=-1), new_cache(model)
        reused = copy.deepcopy(prefix_cache)  # untimed: a server references, not copies

        def cold(full: Any = full, empty: Any = empty) -> float:
            return clock.time(lambda: forward(model, full, empty))

        def warm(ending: Any = ending, reused: Any = reused) -> float:
            return clock.time(lambda: forward(model, ending, reused))

        # Alternate which goes first, so neither always runs on warmer caches.
        if i % 2:
            warm_t, cold_t = warm(), cold()
        else:
            cold_t, warm_t = cold(), warm()
        if i >= warmup:
            cold_s.append(cold_t)
            warm_s.append(warm_t)
    # The ratio of the two medians the report shows (not a median of pair ratios,
    # which need not equal it); the pairs' interleaving is kept for its interval.
    cold_samples, warm_samples = Samples(cold_s), Samples(warm_s)
    return Timed(cold_samples, warm_samples, warm_samples.median / cold_samples.median)


def check_outputs(model: Any, prefix_cache: Any, full: Any, new_tokens: int, dtype: str) -> Check:
    """Greedy generation from `full` cold and from `prefix_cache`: equal outputs?"""
    cold = _greedy(model, full, None, new_tokens)
    warm = _greedy(model, full, copy.deepcopy(prefix_cache), new_tokens)
    tokens_match = cold.sequences.tolist() == warm.sequences.tolist()
    agree = _agreeing_steps(cold.sequences, warm.sequences, full.shape[-1])
    split = None if tokens_match else max(0, agree - 1)
    diffs, scale = [0.0], 1.0
    for step in range(max(1, agree)):  # the first step's logits always compare
        a, b = cold.logits[step].float(), warm.logits[step].float()
        diffs.append(float((a - b).abs().max()))
        scale = max(scale, float(a.abs().max()))
    worst = max(diffs)
    within = worst <= logit_tolerance(dtype, scale)
    return Check(tokens_match, worst, within, len(cold.logits), is_strict(dtype), split)


def _greedy(model: Any, ids: Any, cache: Any | None, new_tokens: int) -> Any:
    extra = {"cache": cache} if cache is not None else {}
    return model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,  # no early stop: every check compares as many steps
        do_sample=False,
        output_logits=True,
        return_dict_in_generate=True,
        pad_token_id=_pad_id(model),
        **extra,
    )


def _agreeing_steps(a: Any, b: Any, start: int) -> int:
    """How many generated tokens agree before the first difference."""
    new_a, new_b = a[0, start:].tolist(), b[0, start:].tolist()
    count = 0
    for x, y in zip(new_a, new_b, strict=False):
        if x != y:
            break
        count += 1
    return min(count + 1, len(new_a), len(new_b))  # the diverging step's logits compare too


def _pad_id(model: Any) -> int:
    config = model.generation_config
    for value in (config.pad_token_id, config.eos_token_id):
        if isinstance(value, int):
            return value
        if isinstance(value, list) and value:
            return int(value[0])
    return 0
