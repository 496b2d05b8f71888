"""How far the serving estimate misses published serving measurements: the error band
every estimated figure carries.

No torch import. `profiling/data/validation.json` holds, per metric, the median
|predicted / published − 1| over the published rows the estimate can express (made by
`python bench/estimate_vs_published.py --write-validation`, from the rows and sources in
`bench/data/`; a test fails when it no longer matches what the model projects), and
each row's predicted and published pair for the report's scatter chart.

A figure's band is that of its metric: TTFT and ITL/TPOT against the rows that
publish them (online serving, at a rate or a concurrency), throughput against every
row that publishes it (offline runs included).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from profiling import serde

# A prediction's metric -> the validation's metric.
METRIC_OF = {
    "ttft_seconds": "ttft",
    "ttft_p99_seconds": "ttft",
    "tpot_seconds": "itl_tpot",
    "tpot_p99_seconds": "itl_tpot",
    "itl_p99_seconds": "itl_tpot",
    "output_tokens_per_second": "throughput",
    "decode_tokens_per_second": "throughput",
}
LABELS = {"ttft": "TTFT", "itl_tpot": "ITL/TPOT", "throughput": "throughput"}


@dataclass(frozen=True)
class Band:
    """The median error of one metric against the published rows that give it."""

    metric: str  # "ttft", "itl_tpot", "throughput"
    median_error: float  # |predicted / published − 1|, median over the rows
    rows: int
    worst_error: float

    def text(self) -> str:
        rows = f"{self.rows} published serving row{'s' if self.rows != 1 else ''}"
        return f"± {self.median_error:.0%} against {rows} ({LABELS[self.metric]}, median)"

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)


@cache
def stored() -> dict[str, Any]:
    """The stored validation ({} when none was written)."""
    entry = resources.files("profiling").joinpath("data/validation.json")
    return json.loads(entry.read_text()) if entry.is_file() else {}


def band(prediction_metric: str) -> Band | None:
    """The band of a prediction's metric (None: no published row gives that metric)."""
    metric = METRIC_OF.get(prediction_metric)
    found = stored().get("bands", {}).get(metric) if metric else None
    if not found:
        return None
    return Band(metric, found["median_error"], found["rows"], found["worst_error"])


def points() -> list[dict[str, Any]]:
    """Each compared row's {"id", "metric", "predicted", "published", "engine"}."""
    return list(stored().get("points", []))


def summary_of(result: dict[str, Any]) -> dict[str, Any]:
    """What validation.json keeps of the comparison (`compare` in the bench script)."""
    overall = result["summary"]["overall"]
    bands = {
        metric: {k: round(overall[metric][k], 4) if isinstance(overall[metric][k], float)
                 else overall[metric][k] for k in ("median_error", "rows", "worst_error")}
        for metric in LABELS if metric in overall
    }  # fmt: skip
    pairs = [
        {"id": r["id"], "metric": metric, "engine": r["engine"],
         "predicted": round(m["predicted"], 4), "published": m["published"]}
        for r in result["rows"] if r["metrics"] and not r["weak"]
        for metric, m in r["metrics"].items() if m["predicted"]
    ]  # fmt: skip
    return {"source": "bench/estimate_vs_published.py", "bands": bands, "points": pairs}
