"""Measured prefill/decode interference: a decode step alone, and with a prefill joining it.

Requests that are decoding (`decode_batch` rows over a cache of
`decode_context` tokens) take one step; in a mixed step a new request's
prompt of `prefill_tokens` is prefilled in the same iteration, one after the
other, as a scheduler without chunked prefill runs it, so the decode rows
get their token only when both are done. Three things are timed, sample by
sample interleaved so drifting load hits all alike: the decode step alone,
the prefill alone, and the mixed step. The cache is rolled back one token
after each step (or, for caches that cannot be cropped, copied before each
step outside the timing), so every sample sees the same context.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from profiling.measure.timing import Clock
from profiling.results import Samples

OnSample = Callable[[int, int], None]


@dataclass
class Interference:
    decode_alone: Samples
    prefill: Samples
    mixed: Samples


def _ids(vocab: int, batch: int, tokens: int, device: str, seed: int) -> Any:
    # torch: kept out of the site's imports
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, tokens), generator=generator).to(device)


class _Decoder:
    """A filled cache and one decode step over it that leaves the context unchanged."""

    def __init__(self, model: Any, context_ids: Any, step_ids: Any) -> None:
        # heavy: transformers, kept out of the site's imports
        from transformers import DynamicCache

        self.model, self.step_ids = model, step_ids
        self.cache = DynamicCache(config=model.config)
        if hasattr(self.cache, "activate_past_recording"):
            self.cache.activate_past_recording()  # lets sliding-window layers be cropped back
        model(input_ids=context_ids, cache=self.cache, use_cache=True, logits_to_keep=1)
        self.croppable = bool(getattr(self.cache, "is_croppable", True))
        self.work = self.cache

    def setup(self) -> None:
        if not self.croppable:
            self.work = copy.deepcopy(self.cache)

    def step(self) -> None:
        self.model(input_ids=self.step_ids, cache=self.work, use_cache=True, logits_to_keep=1)
        if self.croppable:
            self.work.crop(-1)


def measure_interference(
    model: Any,
    *,
    decode_batch: int,
    decode_context: int,
    prefill_tokens: int,
    device: str,
    clock: Clock,
    warmup: int = 1,
    repeats: int = 5,
    seed: int = 0,
    on_sample: OnSample | None = None,
) -> Interference:
    """Time decode alone, prefill alone and the mixed step, interleaved."""
    # torch: kept out of the site's imports
    import torch

    vocab = model.config.get_text_config(decoder=True).vocab_size
    with torch.inference_mode():
        decoder = _Decoder(
            model,
            _ids(vocab, decode_batch, decode_context, device, seed),
            _ids(vocab, decode_batch, 1, device, seed + 1),
        )
        prompt = _ids(vocab, 1, prefill_tokens, device, seed + 2)

        def prefill() -> None:
            model(input_ids=prompt, use_cache=True, logits_to_keep=1)

        def mixed() -> None:
            decoder.step()
            prefill()

        times: dict[str, list[float]] = {"alone": [], "prefill": [], "mixed": []}
        total = warmup + repeats
        for i in range(total):
            decoder.setup()
            alone = clock.time(decoder.step)
            took = clock.time(prefill)
            decoder.setup()
            both = clock.time(mixed)
            if i >= warmup:
                times["alone"].append(alone)
                times["prefill"].append(took)
                times["mixed"].append(both)
            if on_sample is not None:
                on_sample(i + 1, total)
    return Interference(Samples(times["alone"]), Samples(times["prefill"]), Samples(times["mixed"]))
