"""What every technique's advice rule shares: the smallest gain worth recommending,
the outcome types, the capacity arithmetic of smaller weights, and the numbers'
text in the advice's sentences (through `profiling.units`, as the report's are).

Below the techniques and above the measurements: a rule (`profiling/<technique>/
advice.py`) reads `profiling.technique_kit.facts.Facts` and its own typed result, and builds
`profiling.technique_kit.advice_results` types with these helpers.
"""

from __future__ import annotations

from typing import Any

from profiling.measure.stats import WORSE, Interval
from profiling.technique_kit.advice_results import Change, NotRecommended, Recommendation
from profiling.technique_kit.facts import Facts
from profiling.units import significant

MIN_GAIN = 1.05
DISAGGREGATION_MIN_SPIKE = 1.5  # a prefill joining a decode step slows it this much or more
MAKES_IT_FIT = 10.0
# Timing noise allowed above a physical limit (a speculative speedup's tokens per target
# pass, ...) before a figure is called impossible: one margin for every technique.
BOUND_MARGIN = 1.10
Outcome = Recommendation | NotRecommended


def weak(technique: str, gain: float, what: str, key: str) -> NotRecommended:
    """A gain under MIN_GAIN: about the same, or slower where it is as far below 1."""
    if gain < 1 / MIN_GAIN:
        return NotRecommended(technique, f"{what}: {gain:.2f}×, slower than without", key)
    return NotRecommended(technique, f"{what}: {gain:.2f}×, about the same", key)


MIN_REPEATS = 3  # fewer cannot bound the noise: two repeats bracket the median half the time


def judged(technique: str, what: str, interval: Interval, key: str) -> NotRecommended | None:
    """None when a measured effect is a win worth ranking; otherwise why it is not one.

    A win needs at least MIN_REPEATS repeats and its whole interval at or above
    MIN_GAIN: the effect is worth acting on with 95 % confidence, not only at its
    median (a sweep's best point is the luckiest of several, so its median flatters
    it). An interval below 1.0 is a loss; one above 1.0 but wholly under MIN_GAIN
    is real but too small; anything else is inconclusive.
    """
    if interval.repeats < MIN_REPEATS:
        why = (
            f"{what}: {interval.ratio:.2f}× from {interval.repeats} repeat(s), too few to bound "
            f"the noise ({MIN_REPEATS} or more are needed), so the effect is inconclusive"
        )
        return NotRecommended(technique, why, key, inconclusive=True)
    if interval.verdict == WORSE:
        return NotRecommended(technique, f"{what}: {interval.text()}: worse than without", key)
    if interval.low >= MIN_GAIN:
        return None
    if interval.high < MIN_GAIN and interval.low > 1.0:
        return weak(technique, interval.ratio, what, key)
    why = (
        f"{what}: {interval.text()}: the interval reaches below the {MIN_GAIN:.2f}× worth "
        "acting on, so the effect is inconclusive, not a win (full mode takes more repeats)"
    )
    return NotRecommended(technique, why, key, inconclusive=True)


def interval_fields(interval: Interval, of: str = "") -> dict[str, Any]:
    """A measured recommendation's confidence line and its gain's interval:
    "measured: 95 % interval 1.31–1.55× over 5 repeats" (then what the interval is `of`)."""
    text = f"measured: {interval.bounds()} over {interval.repeats} repeats"
    return {
        "confidence": f"{text} ({of})" if of else text,
        "gain_low": interval.low,
        "gain_high": interval.high,
    }


def your_users(count: int) -> str:
    """ "your 1 user", "your 16 users" """
    return f"your {count} user{'s' if count != 1 else ''}"


def ms(seconds: float) -> str:
    """The milliseconds of `seconds` as a bare number, for "TPOT 12.3 → 8.10 ms"."""
    return significant(seconds * 1e3)


def capacity_gain(facts: Facts, weights_after: int) -> float:
    """Factor by which the requests that fit grow with smaller weights (MAKES_IT_FIT when
    the workload fits only after); the weights ratio when no GPU memory is known."""
    fit, after = facts.fit, facts.fit_with_weights(weights_after)
    if fit is None or after is None:
        return facts.weights_bytes / max(1, weights_after)
    if not after.fits:
        return 1.0
    if not fit.fits:
        return MAKES_IT_FIT
    return min(MAKES_IT_FIT, after.max_concurrency / max(1, fit.max_concurrency))


def capacity_changes(facts: Facts, weights_after: int) -> list[Change]:
    fit, after = facts.fit, facts.fit_with_weights(weights_after)
    if fit is None or after is None:
        return []
    return [
        Change("max_concurrency", fit.max_concurrency, after.max_concurrency, "requests"),
        Change("memory_headroom_bytes", fit.headroom_bytes, after.headroom_bytes, "bytes"),
    ]


def decode_seconds_with_weights(facts: Facts, weights_after: int) -> float:
    """The TPOT again with fewer weight bytes read per step (the calibrated bytes rate)."""
    shapes, calibration = facts.shapes, facts.calibration
    batch, context = facts.workload.concurrency, facts.decode_context
    if shapes is None or calibration is None:
        kv = facts.kv_bytes_per_token * batch * context
        return facts.tpot_seconds * (weights_after + kv) / (facts.weights_bytes + kv)
    flops = shapes.decode_flops(batch, context)
    moved = shapes.decode_bytes(facts.dtype, batch, context)
    kv = facts.kv_bytes_per_token * batch * context
    # The weights a step reads shrink in proportion (a mixture of experts reads only
    # the routed experts' share of them, quantized or not).
    read_after = (moved - kv) * weights_after / facts.weights_bytes + kv
    before = calibration.decode.seconds(flops, moved)
    after = calibration.decode.seconds(flops, read_after)
    return facts.tpot_seconds * after / before
