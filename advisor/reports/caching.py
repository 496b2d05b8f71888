"""The prefix-caching section: cold against warm TTFT over prefix shares, the
workload's shared prefix, conversation turns, and the reuse in the user's prompts.

Built from the raw `result["caching"]` dict the library writes
(`profiling.caching.results.CachingResult.to_dict()`). Warnings and labels stay
plain strings here; the template's autoescape is what makes them safe. A point
whose outputs with a reused cache differ from the cold outputs is flagged on its
row and counted for the banner above the tables.
"""

from __future__ import annotations

from typing import Any

from advisor.reports.quantization import median
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


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value or [] if isinstance(item, dict)]


def _noisy(*samples: Any) -> bool:
    return any(isinstance(s, dict) and s.get("noisy") for s in samples)


def change(warm_to_cold: Any) -> str:
    """Warm against cold as "47.0 % less" (or "8.20 % more" when reuse cost time)."""
    if not isinstance(warm_to_cold, int | float) or isinstance(warm_to_cold, bool):
        return ""
    saving = 1.0 - warm_to_cold
    if abs(saving) < SAME_WITHIN:
        return "same"
    return f"{pct(abs(saving))} {'less' if saving >= 0 else 'more'}"


def point_row(point: dict[str, Any]) -> dict[str, Any]:
    """A prefix point for the sweep table: medians in seconds, the match flag kept strict."""
    cold, warm = point.get("cold_ttft_seconds"), point.get("warm_ttft_seconds")
    return {
        "label": str(point.get("label") or ""),
        "prompt_tokens": point.get("prompt_tokens"),
        "prefix_tokens": point.get("prefix_tokens"),
        "prefix_share": point.get("prefix_share"),
        "cold_s": median(cold),
        "warm_s": median(warm),
        "warm_to_cold": point.get("warm_to_cold"),
        "change": change(point.get("warm_to_cold")),
        "cache_bytes": point.get("prefix_cache_bytes"),
        # Only an explicit true is a match: a missing flag is not evidence.
        "outputs_match": point.get("outputs_match") is True,
        "max_logit_text": number_text(point.get("max_abs_logit_diff")),
        "greedy_tokens": point.get("greedy_tokens"),
        "noisy": _noisy(cold, warm),
    }


def turn_row(turn: dict[str, Any]) -> dict[str, Any]:
    cold, warm = turn.get("cold_ttft_seconds"), turn.get("warm_ttft_seconds")
    return {
        "turn": turn.get("turn"),
        "prompt_tokens": turn.get("prompt_tokens"),
        "cached_tokens": turn.get("cached_tokens"),
        "new_tokens": turn.get("new_tokens"),
        "cold_s": median(cold),
        "warm_s": median(warm),
        "warm_to_cold": turn.get("warm_to_cold"),
        "change": change(turn.get("warm_to_cold")),
        "cache_bytes": turn.get("cache_bytes"),
        "outputs_match": turn.get("outputs_match") is True,
        "noisy": _noisy(cold, warm),
    }


def bucket_label(bucket: dict[str, Any]) -> str:
    """A histogram bucket's range in tokens: "0", "16–63", "4,096+"."""
    low, high = bucket.get("low"), bucket.get("high")
    if not isinstance(low, int):
        return "?"
    if high is None:
        return f"{low:,}+"
    return f"{low:,}" if high == low else f"{low:,}–{high:,}"


def sample_context(sample: Any) -> dict[str, Any] | None:
    """The user's prompts: reuse figures, histogram rows and the measured saving."""
    if not isinstance(sample, dict):
        return None
    measured = sample.get("measured")
    return {
        **sample,
        "by_bytes": sample.get("tokenization") == "bytes",
        "unit": "bytes" if sample.get("tokenization") == "bytes" else "tokens",
        "histogram": [
            {"label": bucket_label(b), "prompts": b.get("prompts")}
            for b in _dicts(sample.get("shared_prefix_histogram"))
        ],
        "measured_row": point_row(measured) if isinstance(measured, dict) else None,
    }


def section_context(caching: Any) -> dict[str, Any] | None:
    if not isinstance(caching, dict):
        return None
    sweep = [point_row(p) for p in _dicts(caching.get("prefix_sweep"))]
    shared = caching.get("shared_prefix")
    shared_row = point_row(shared) if isinstance(shared, dict) else None
    turns = [turn_row(t) for t in _dicts(caching.get("multi_turn"))]
    sample = sample_context(caching.get("prompt_sample"))
    rows = sweep + turns + [r for r in (shared_row, sample and sample["measured_row"]) if r]
    return {
        "raw": caching,
        "sweep": sweep,
        "shared": shared_row,
        "shared_requested": caching.get("shared_prefix_requested_tokens") or 0,
        "turns": turns,
        "sample": sample,
        "sample_hint": SAMPLE_HINT,
        "mismatches": sum(1 for row in rows if not row["outputs_match"]),
        "warnings": [str(w) for w in caching.get("warnings") or []],
    }
