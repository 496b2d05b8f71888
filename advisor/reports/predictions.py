"""Predictions beside measurements: each point of `result["predictions"]` as a table
row with its error, and the median error of the calibrated points, which says how
far the projections (and the what-if panel) can be trusted.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from advisor.reports.advice import figure
from profiling.advice.results import CALIBRATED
from profiling.units import UNKNOWN

METRIC_LABELS = {
    "prefill_seconds": "Prefill time",
    "decode_seconds_per_step": "Decode step time",
    "weights_bytes": "Weights",
    "kv_cache_bytes_per_token": "KV cache per token",
    "ttft_seconds": "Time to first token",
    "tpot_seconds": "Time per output token",
    "decode_tokens_per_second": "Decode throughput (all requests)",
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


def point_text(at: Any) -> str:
    if not isinstance(at, dict):
        return UNKNOWN
    parts = [f"{label} {at[key]}".strip() for key, label in AT_LABELS if at.get(key) is not None]
    return ", ".join(parts) or UNKNOWN


def error_band(error: Any) -> str:
    if not _finite(error):
        return ""
    size = abs(error)
    return "good" if size <= GOOD_WITHIN else "fair" if size <= FAIR_WITHIN else "poor"


def row(point: dict[str, Any]) -> dict[str, Any]:
    unit, error = str(point.get("unit") or ""), point.get("error")
    return {
        "metric": METRIC_LABELS.get(point.get("metric"), str(point.get("metric"))),
        "key": point.get("metric"),
        "at": point_text(point.get("at")),
        "predicted": figure(point.get("predicted"), unit),
        "measured": figure(point.get("measured"), unit),
        "error": f"{error:+.1%}".replace("%", " %") if _finite(error) else UNKNOWN,
        "band": error_band(error),
        "basis": point.get("basis") or UNKNOWN,
        "note": point.get("note") or "",
    }


def median_abs_error(points: list[dict[str, Any]], basis: str = CALIBRATED) -> float | None:
    errors = [abs(p["error"]) for p in points
              if p.get("basis") == basis and _finite(p.get("error"))]  # fmt: skip
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


def section_context(raw: Any) -> dict[str, Any] | None:
    """The predictions section; None when the result has none (written before predictions)."""
    if not isinstance(raw, list):
        return None
    points = [p for p in raw if isinstance(p, dict)]
    median = median_abs_error(points)
    return {
        "rows": [row(p) for p in points],
        "median_error": median,
        "median_band": error_band(median),
        "trust": trust_text(median),
        "calibrated": sum(p.get("basis") == CALIBRATED for p in points),
    }
