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
import statistics
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
# A feature of the model's architecture is covered by the bands once this many headline
# rows had it: one or two rows are an anecdote, not a band.
MIN_ROWS_PER_FEATURE = 3


@dataclass(frozen=True)
class Band:
    """The median error of one metric against the published rows that give it."""

    metric: str  # "ttft", "itl_tpot", "throughput"
    median_error: float  # |predicted / published − 1|, median over the rows
    rows: int
    worst_error: float
    kind: str = ""  # "dense", "mixture of experts": the models the rows served; "" all

    def text(self) -> str:
        rows = f"{self.rows} published serving row{'s' if self.rows != 1 else ''}"
        of = f" of {self.kind} models" if self.kind else ""
        return f"± {self.median_error:.0%} against {rows}{of} ({LABELS[self.metric]}, median)"

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)


@cache
def stored() -> dict[str, Any]:
    """The stored validation ({} when none was written)."""
    entry = resources.files("profiling").joinpath("data/validation.json")
    return json.loads(entry.read_text()) if entry.is_file() else {}


def features(shapes: Any) -> list[str]:
    """What of a model's architecture and checkpoint the estimate models apart: a band
    measured on rows without one of them says nothing about a model with it."""
    s = shapes.sized
    out = ["mixture of experts" if s.experts else "dense"]
    if s.shared_experts:
        out.append("shared experts")
    if s.kv_replicated:
        out.append("MLA latent cache")
    if s.window_layers:
        out.append("sliding-window or chunked attention")
    if s.state_layers:
        out.append("linear-attention or state-space layers")
    if s.checkpoint is not None:
        out.append(f"a {s.checkpoint.label} checkpoint")
    return out


def unchecked(shapes: Any) -> list[str]:
    """The model's features no published row the band was measured on has."""
    covered = set(stored().get("features") or ("dense", "mixture of experts"))
    return [f for f in features(shapes) if f not in covered]


def band(prediction_metric: str, shapes: Any = None) -> Band | None:
    """The band of a prediction's metric (None: no published row gives that metric, or
    the rows never had a feature of `shapes`' model: `unchecked`)."""
    if shapes is not None and unchecked(shapes):
        return None
    metric = METRIC_OF.get(prediction_metric)
    if shapes is not None and metric:
        # The rows of models of its kind: a mixture of experts misses by its own margin.
        kind = features(shapes)[0]
        of_kind = stored().get("kinds", {}).get(kind, {}).get(metric)
        if of_kind and of_kind["rows"] >= MIN_ROWS_PER_FEATURE:
            return Band(metric, of_kind["median_error"], of_kind["rows"],
                        of_kind["worst_error"], kind)  # fmt: skip
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
    seen: dict[str, int] = {}
    for r in result["rows"]:
        if r["metrics"] and not r["weak"]:
            for f in r.get("features", ()):
                seen[f] = seen.get(f, 0) + 1
    covered = sorted(f for f, n in seen.items() if n >= MIN_ROWS_PER_FEATURE)
    return {"source": "bench/estimate_vs_published.py", "bands": bands, "points": pairs,
            "features": covered, "kinds": _kind_bands(result)}  # fmt: skip


def _kind_bands(result: dict[str, Any]) -> dict[str, Any]:
    """Per metric, the median and worst |predicted / published − 1| over the headline
    rows of dense models and of mixtures of experts apart."""
    errors: dict[str, dict[str, list[float]]] = {}
    for r in result["rows"]:
        if not r["metrics"] or r["weak"] or not r.get("features"):
            continue
        for metric, m in r["metrics"].items():
            if m.get("predicted") and m.get("error") is not None:
                errors.setdefault(r["features"][0], {}).setdefault(metric, []).append(m["error"])
    return {
        kind: {metric: {"median_error": round(statistics.median(e), 4), "rows": len(e),
                        "worst_error": round(max(e), 4)}
               for metric, e in sorted(by_metric.items())}
        for kind, by_metric in sorted(errors.items())
    }  # fmt: skip
