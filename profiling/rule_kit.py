"""What every technique's advice rule shares: the smallest gain worth recommending,
the outcome types, the capacity arithmetic of smaller weights, and the numbers'
text in the advice's sentences (through `profiling.units`, as the report's are).

Below the techniques and above the measurements: a rule (`profiling/<technique>/
advice.py`) reads `profiling.facts.Facts` and its own typed result, and builds
`profiling.advice_results` types with these helpers.
"""

from __future__ import annotations

from profiling.advice_results import Change, NotRecommended, Recommendation
from profiling.facts import Facts
from profiling.units import significant

MIN_GAIN = 1.05
DISAGGREGATION_MIN_SPIKE = 1.5  # a prefill joining a decode step slows it this much or more
MAKES_IT_FIT = 10.0
Outcome = Recommendation | NotRecommended


def weak(technique: str, gain: float, what: str, key: str) -> NotRecommended:
    return NotRecommended(technique, f"{what}: {gain:.2f}×, about the same", key)


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
    before = calibration.decode.seconds(flops, moved)
    after = calibration.decode.seconds(flops, moved - (facts.weights_bytes - weights_after))
    return facts.tpot_seconds * after / before
