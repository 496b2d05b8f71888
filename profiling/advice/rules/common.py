"""What every rule shares: the smallest gain worth recommending, and the outcome types."""

from __future__ import annotations

from profiling.advice_results import NotRecommended, Recommendation

MIN_GAIN = 1.05
DISAGGREGATION_MIN_SPIKE = 1.5  # a prefill joining a decode step slows it this much or more
Outcome = Recommendation | NotRecommended


def weak(technique: str, gain: float, what: str, key: str) -> NotRecommended:
    return NotRecommended(technique, f"{what}: {gain:.2f}×, about the same", key)
