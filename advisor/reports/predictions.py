"""Predictions beside measurements: each of the profile's prediction points as a table
row with its error, and the median error of the calibrated points, which says how
far the projections (and the what-if panel) can be trusted.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from advisor.reports.advice import figure
from profiling.technique_kit.advice_results import CALIBRATED, PredictionPoint
from profiling.units import UNKNOWN

METRIC_LABELS = {
    "prefill_seconds": "Prefill time",
    "decode_seconds_per_step": "Decode step time",
    "weights_bytes": "Weights",
    "kv_cache_bytes_per_token": "KV cache per token",
    "ttft_seconds": "Time to first token",
    "tpot_seconds": "Time per output token",
    "decode_tokens_per_second": "Decode throughput (all requests)",
    "ttft_p99_seconds": "Time to first token, p99",
    "tpot_p99_seconds": "Time per output token, p99",
    "itl_p99_seconds": "Inter-token latency, p99",
    "output_tokens_per_second": "Output throughput (all requests, served)",
    "memory_bytes": "Memory (weights + KV cache)",
}
# The point's coordinates, in the order they read best.
AT_LABELS = (
    ("prompt_tokens", "prompt"),
    ("output_tokens", "output"),
    ("batch_size", "batch"),
    ("concurrency", "concurrency"),
    ("context_tokens", "context"),
    ("dtype", ""),
    ("device", "on"),
)
# |error| bands: within the first is good, within the second fair, beyond poor.
GOOD_WITHIN, FAIR_WITHIN = 0.10, 0.25


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def point_text(at: dict[str, Any]) -> str:
    parts = [f"{label} {at[key]}".strip() for key, label in AT_LABELS if at.get(key) is not None]
    return ", ".join(parts) or UNKNOWN


def error_band(error: Any) -> str:
    if not _finite(error):
        return ""
    size = abs(error)
    return "good" if size <= GOOD_WITHIN else "fair" if size <= FAIR_WITHIN else "poor"


def row(point: PredictionPoint) -> dict[str, Any]:
    error = point.error
    return {
        "metric": METRIC_LABELS.get(point.metric, point.metric),
        "key": point.metric,
        "at": point_text(point.at),
        "predicted": figure(point.predicted, point.unit),
        "measured": figure(point.measured, point.unit),
        "error": f"{error:+.1%}".replace("%", " %") if _finite(error) else UNKNOWN,
        "band": error_band(error),
        "basis": point.basis or UNKNOWN,
        "note": point.note,
        "published_error": point.published_error_text,
    }


def median_abs_error(points: list[PredictionPoint], basis: str = CALIBRATED) -> float | None:
    errors = [abs(p.error) for p in points if p.basis == basis and _finite(p.error)]
    return statistics.median(errors) if errors else None


def trust_text(median: float | None) -> str:
    if median is None:
        return "No point was predicted from a fit that left it out: the projections are untested."
    band = error_band(median)
    verdict = {
        "good": "close: take the projections at face value",
        "fair": "fair: read the projections as ±25 %",
        "poor": "loose: read the projections as a rough order of magnitude",
    }[band]
    return (
        f"Each measured point predicted from the others is off by a median {median:.0%}; {verdict}."
    )


def section_context(points: list[PredictionPoint] | None) -> dict[str, Any] | None:
    """The predictions section; None when the result has none (written before predictions)."""
    if points is None:
        return None
    median = median_abs_error(points)
    return {
        "rows": [row(p) for p in points],
        "median_error": median,
        "median_band": error_band(median),
        "trust": trust_text(median),
        "calibrated": sum(p.basis == CALIBRATED for p in points),
        "published": next((p.published_error for p in points if p.published_error), None),
    }
