"""The prefix-caching section: cold against warm TTFT over prefix shares, the
workload's shared prefix, conversation turns, and the reuse in the user's prompts.

Built from the typed `CachingResult` of the profile. Warnings and labels stay
plain strings here; the template's autoescape is what makes them safe. A point
whose outputs with a reused cache differ from the cold outputs is flagged on its
row and counted for the banner above the tables.
"""

from __future__ import annotations

from typing import Any

from advisor.reports.quantization import median
from profiling.caching.results import (
    CachingResult,
    PrefixBucket,
    PrefixPoint,
    PromptSampleReuse,
    TurnPoint,
)
from profiling.measure.stats import INCONCLUSIVE, Interval, ratio_interval
from profiling.results import Samples
from profiling.units import number_text, pct

# Shown when the experiment ran without the user's prompts.
SAMPLE_HINT = (
    "No prompt sample was given, so the figures above are for synthetic prompts only. "
    "To see how much of your own traffic a cache would reuse, start a new profile with a "
    "file of your prompts under “Reuse prompt work” (one per line, or JSON Lines with a "
    "prompt or chat messages), or pass --prompts FILE on the command line."
)


# A warm/cold ratio this close to 1 reads as "same" rather than "0.2 % less".
SAME_WITHIN = 0.005


def _noisy(*samples: Samples) -> bool:
    return any(s.noisy for s in samples)


def change(warm_to_cold: float | None, interval: Interval | None = None) -> str:
    """Warm against cold as "47.0 % less" (or "8.20 % more" when reuse cost time), or
    "within noise" when the interleaved repeats' `interval` holds "no change"."""
    if warm_to_cold is None:
        return ""
    if interval is not None and interval.verdict == INCONCLUSIVE:
        return "within noise"
    saving = 1.0 - warm_to_cold
    if abs(saving) < SAME_WITHIN:
        return "same"
    return f"{pct(abs(saving))} {'less' if saving >= 0 else 'more'}"


def point_row(point: PrefixPoint) -> dict[str, Any]:
    """A prefix point for the sweep table: medians in seconds."""
    cold, warm = point.cold_ttft_seconds, point.warm_ttft_seconds
    return {
        "label": point.label,
        "prompt_tokens": point.prompt_tokens,
        "prefix_tokens": point.prefix_tokens,
        "prefix_share": point.prefix_share,
        "cold_s": median(cold),
        "warm_s": median(warm),
        "warm_to_cold": point.warm_to_cold,
        **_warm_to_cold(point.warm_to_cold, cold, warm),
        "cache_bytes": point.prefix_cache_bytes,
        "outputs_match": point.outputs_match,
        "max_logit_text": number_text(point.max_abs_logit_diff),
        "greedy_tokens": point.greedy_tokens,
        "noisy": _noisy(cold, warm),
    }


def turn_row(turn: TurnPoint) -> dict[str, Any]:
    cold, warm = turn.cold_ttft_seconds, turn.warm_ttft_seconds
    return {
        "turn": turn.turn,
        "prompt_tokens": turn.prompt_tokens,
        "cached_tokens": turn.cached_tokens,
        "new_tokens": turn.new_tokens,
        "cold_s": median(cold),
        "warm_s": median(warm),
        "warm_to_cold": turn.warm_to_cold,
        **_warm_to_cold(turn.warm_to_cold, cold, warm),
        "cache_bytes": turn.cache_bytes,
        "outputs_match": turn.outputs_match,
        "noisy": _noisy(cold, warm),
    }


def _warm_to_cold(ratio: float, cold: Samples, warm: Samples) -> dict[str, str]:
    """A row's warm / cold change and its interval, from one interval of the pairs."""
    interval = ratio_interval(warm.samples, cold.samples, paired=True)
    return {
        "change": change(ratio, interval),
        "interval": f"warm / cold {interval.text()}" if interval is not None else "",
    }


def bucket_label(bucket: PrefixBucket) -> str:
    """A histogram bucket's range in tokens: "0", "16–63", "4,096+"."""
    low, high = bucket.low, bucket.high
    if high is None:
        return f"{low:,}+"
    return f"{low:,}" if high == low else f"{low:,}–{high:,}"


def sample_context(sample: PromptSampleReuse | None) -> dict[str, Any] | None:
    """The user's prompts: reuse figures, histogram rows and the measured saving."""
    if sample is None:
        return None
    by_bytes = sample.tokenization == "bytes"
    return {
        **vars(sample),
        "by_bytes": by_bytes,
        "unit": "bytes" if by_bytes else "tokens",
        "histogram": [
            {"label": bucket_label(b), "prompts": b.prompts} for b in sample.shared_prefix_histogram
        ],
        "measured_row": point_row(sample.measured) if sample.measured is not None else None,
    }


def section_context(caching: CachingResult | None) -> dict[str, Any] | None:
    if caching is None:
        return None
    sweep = [point_row(p) for p in caching.prefix_sweep]
    shared = caching.shared_prefix
    shared_row = point_row(shared) if shared is not None else None
    turns = [turn_row(t) for t in caching.multi_turn]
    sample = sample_context(caching.prompt_sample)
    rows = sweep + turns + [r for r in (shared_row, sample and sample["measured_row"]) if r]
    return {
        "raw": caching,
        "sweep": sweep,
        "shared": shared_row,
        "shared_requested": caching.shared_prefix_requested_tokens,
        "turns": turns,
        "sample": sample,
        "sample_hint": SAMPLE_HINT,
        "mismatches": sum(1 for row in rows if not row["outputs_match"]),
        "warnings": list(caching.warnings),
    }
