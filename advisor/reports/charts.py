"""Plotly figures for the report, as plain dicts (`{"data": [...], "layout": {...}}`).

The page receives them through `json_script` and draws them with plotly.js;
no plotly Python objects are needed. Units on the axes are the report's:
GiB (2³⁰ B), ms, tok/s.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from advisor.reports.charts_base import (
    GIB,
    PALETTE,
    Figure,
    base_layout,
    finite,
    sweep_axis,
    y_range,
)
from advisor.reports.conversations import conversation_chart
from advisor.reports.experiment_charts import (
    caching_charts,
    interference_chart,
    quantization_chart,
    speculative_chart,
)
from advisor.reports.insight_charts import insight_charts
from profiling.profile import Profile
from profiling.projection import validation
from profiling.results import DecodePoint, PrefillPoint
from profiling.technique_kit.advice_results import PredictionPoint
from profiling.units import pct

MEMORY_COLOURS = {"weights": "#0072B2", "kv": "#E69F00", "free": "#B8E0C8", "reserve": "#D9D9D9"}


def _memory_bar(name: str, gb: float, colour: str) -> dict[str, Any]:
    return {
        "type": "bar",
        "orientation": "h",
        "name": name,
        "y": ["memory"],
        "x": [gb],
        "marker": {"color": colour},
        "hovertemplate": f"{name}: %{{x:.3g}} GiB<extra></extra>",
    }


def memory_chart(profile: Profile) -> Figure:
    """Weights + KV cache for the workload, against the target GPU's usable memory."""
    memory, fit, work = profile.memory, profile.memory.fit, profile.config.workload
    if fit is None:
        kv = memory.kv_cache_bytes_per_token * work.concurrency * work.context_tokens
        data = [
            _memory_bar("Weights", memory.weights_bytes / GIB, MEMORY_COLOURS["weights"]),
            _memory_bar(f"KV cache ({work.concurrency} × {work.context_tokens} tokens)",
                        kv / GIB, MEMORY_COLOURS["kv"]),
        ]  # fmt: skip
        title, shapes = "Memory needed (no target GPU chosen)", []
    else:
        data = [
            _memory_bar("Weights", fit.weights_bytes / GIB, MEMORY_COLOURS["weights"]),
            _memory_bar(f"KV cache ({fit.concurrency} × {fit.context_tokens} tokens)",
                        fit.kv_cache_bytes / GIB, MEMORY_COLOURS["kv"]),
            _memory_bar("Free", max(fit.available_bytes - fit.required_bytes, 0) / GIB,
                        MEMORY_COLOURS["free"]),
        ]  # fmt: skip
        reserve = fit.device_memory_bytes * fit.gpu_count - fit.available_bytes
        if reserve > 0 and fit.required_bytes <= fit.available_bytes:
            data.append(_memory_bar("Reserved (activations, runtime)", reserve / GIB,
                                    MEMORY_COLOURS["reserve"]))  # fmt: skip
        verdict = "fits" if fit.fits else "does not fit"
        # Small models are a sliver of a big GPU: say the share, since the bar cannot.
        share = pct(fit.required_bytes / fit.available_bytes) if fit.available_bytes > 0 else "—"
        title = f"Memory on {fit.gpu_count} × {fit.gpu_kind}: {verdict} ({share} of usable needed)"
        shapes = [_usable_line(fit.available_bytes / GIB)]
    layout = base_layout(title, "GiB", "", barmode="stack", height=230, shapes=shapes)
    layout["yaxis"] = {"visible": False}
    layout["legend"] = {"orientation": "h", "y": -0.5}
    return {"data": data, "layout": layout}


def _usable_line(gb: float) -> dict[str, Any]:
    return {
        "type": "line", "x0": gb, "x1": gb, "yref": "paper", "y0": 0, "y1": 1,
        "line": {"color": "#333", "width": 2, "dash": "dash"},
        "label": {"text": "usable", "textposition": "end"},
    }  # fmt: skip


# Prefill and decode ---------------------------------------------------------------


def prefill_chart(points: list[PrefillPoint]) -> Figure:
    """Prefill latency (median, p10–p90 bars) vs prompt length, one line per batch size."""
    by_batch: dict[int, list[PrefillPoint]] = defaultdict(list)
    for point in points:
        by_batch[point.batch_size].append(point)
    data = []
    for i, (batch, series) in enumerate(sorted(by_batch.items())):
        series.sort(key=lambda p: p.prompt_tokens)
        median = [p.seconds.median * 1e3 for p in series]
        high = [p.seconds.p90 * 1e3 - m for p, m in zip(series, median, strict=True)]
        low = [m - p.seconds.p10 * 1e3 for p, m in zip(series, median, strict=True)]
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": f"batch {batch}",
            "x": [p.prompt_tokens for p in series], "y": median,
            "error_y": {"type": "data", "symmetric": False, "array": high, "arrayminus": low},
            "line": {"color": PALETTE[i % len(PALETTE)]},
            "hovertemplate": f"batch {batch}, %{{x}} tokens: %{{y:.3g}} ms<extra></extra>",
        })  # fmt: skip
    layout = base_layout(
        "Prefill latency vs prompt length", "prompt tokens", "ms (median, p10–p90)"
    )
    layout["xaxis"].update(sweep_axis([p.prompt_tokens for p in points]))
    layout["yaxis"].update(y_range([p.seconds.median * 1e3 for p in points]))
    return {"data": data, "layout": layout}


def decode_chart(points: list[DecodePoint]) -> Figure:
    """Decode throughput vs batch size, one line per context length."""
    by_context: dict[int, list[DecodePoint]] = defaultdict(list)
    for point in points:
        by_context[point.context_tokens].append(point)
    data = []
    for i, (context, series) in enumerate(sorted(by_context.items())):
        series.sort(key=lambda p: p.batch_size)
        tok_s = [p.tokens_per_second for p in series]
        # Throughput is batch / step time, so the slow p90 step is the low bar.
        fast = [p.batch_size / p.seconds_per_token.p10 for p in series]
        slow = [p.batch_size / p.seconds_per_token.p90 for p in series]
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": f"context {context}",
            "x": [p.batch_size for p in series], "y": tok_s,
            "error_y": {
                "type": "data", "symmetric": False,
                "array": [max(f - t, 0.0) for f, t in zip(fast, tok_s, strict=True)],
                "arrayminus": [max(t - s, 0.0) for s, t in zip(slow, tok_s, strict=True)],
            },
            "line": {"color": PALETTE[i % len(PALETTE)]},
            "hovertemplate": f"context {context}, batch %{{x}}: %{{y:.3g}} tok/s<extra></extra>",
        })  # fmt: skip
    layout = base_layout(
        "Decode throughput vs batch size", "batch size (concurrent requests)", "tok/s"
    )
    layout["xaxis"].update(sweep_axis([p.batch_size for p in points]))
    layout["yaxis"].update(y_range([p.tokens_per_second for p in points]))
    return {"data": data, "layout": layout}


# Speculative decoding ---------------------------------------------------------------


PREDICTION_SERIES = {
    "prefill_seconds": ("prefill (left out of its fit)", "circle"),
    "decode_seconds_per_step": ("decode step (left out of its fit)", "diamond"),
    "ttft_seconds": ("your workload: TTFT", "star"),
    "tpot_seconds": ("your workload: TPOT", "square"),
}


def predictions_chart(points: list[PredictionPoint]) -> Figure | None:
    """Predicted against measured times (ms, log-log), one marker per point; on the dotted
    y = x line a prediction is exact. None when no time was both predicted and measured."""
    timed = [
        p for p in points
        if p.unit == "s" and p.metric in PREDICTION_SERIES
        and finite(p.measured) and finite(p.predicted) and (p.measured or 0) > 0
        and p.predicted > 0
    ]  # fmt: skip
    if not timed:
        return None
    data = []
    for i, (metric, (name, symbol)) in enumerate(PREDICTION_SERIES.items()):
        series = [p for p in timed if p.metric == metric]
        if not series:
            continue
        data.append({
            "type": "scatter", "mode": "markers", "name": name,
            "x": [(p.measured or 0) * 1e3 for p in series],
            "y": [p.predicted * 1e3 for p in series],
            "marker": {"size": 10, "symbol": symbol, "color": PALETTE[i % len(PALETTE)]},
            "hovertemplate": f"{name}: measured %{{x:.3g}} ms, predicted %{{y:.3g}} ms"
                             "<extra></extra>",
        })  # fmt: skip
    values = [v for trace in data for v in trace["x"] + trace["y"]]
    low, high = min(values) / 1.5, max(values) * 1.5
    data.append({
        "type": "scatter", "mode": "lines", "name": "exact (y = x)", "x": [low, high],
        "y": [low, high], "line": {"color": "#333", "width": 1, "dash": "dot"}, "hoverinfo": "skip",
    })  # fmt: skip
    layout = base_layout("Predicted against measured", "measured ms", "predicted ms")
    layout["xaxis"].update({"type": "log"})
    layout["yaxis"] = {**layout["yaxis"], "type": "log", "rangemode": "normal"}
    return {"data": data, "layout": layout}


PUBLISHED_SERIES = {
    "throughput": ("output tokens/s", "circle"),
    "ttft": ("TTFT, ms", "star"),
    "itl_tpot": ("ITL/TPOT, ms", "square"),
}


def published_chart(points: list[dict[str, Any]]) -> Figure | None:
    """The estimate against published serving measurements (log-log): one marker per
    published row, the y = x line and the ±20 % band; hovering names the row."""
    if not points:
        return None
    data = []
    for i, (metric, (name, symbol)) in enumerate(PUBLISHED_SERIES.items()):
        series = [p for p in points if p["metric"] == metric and p["predicted"] > 0]
        if not series:
            continue
        data.append({
            "type": "scatter", "mode": "markers", "name": name,
            "x": [p["published"] for p in series], "y": [p["predicted"] for p in series],
            "text": [f"{p['id']} ({p['engine']})" for p in series],
            "marker": {"size": 9, "symbol": symbol, "color": PALETTE[i % len(PALETTE)]},
            "hovertemplate": "%{text}: published %{x:,.4g}, estimated %{y:,.4g}<extra></extra>",
        })  # fmt: skip
    values = [v for trace in data for v in trace["x"] + trace["y"]]
    low, high = min(values) / 1.5, max(values) * 1.5
    for name, factor, dash in (("y = x", 1.0, "dot"), ("+20 %", 1.2, "dash"),
                               ("−20 %", 0.8, "dash")):  # fmt: skip
        data.append({
            "type": "scatter", "mode": "lines", "name": name, "x": [low, high],
            "y": [low * factor, high * factor], "hoverinfo": "skip",
            "line": {"color": "#333" if factor == 1 else "#999", "width": 1, "dash": dash},
        })  # fmt: skip
    layout = base_layout("The estimate against published serving", "published", "estimated")
    layout["xaxis"].update({"type": "log"})
    layout["yaxis"] = {**layout["yaxis"], "type": "log", "rangemode": "normal"}
    return {"data": data, "layout": layout}


def all_charts(profile: Profile) -> dict[str, Figure]:
    figures = {
        "memory": memory_chart(profile),
        "prefill": prefill_chart(profile.prefill),
        "decode": decode_chart(profile.decode),
    }
    ran = profile.experiments
    if ran.speculative is not None:
        figures["speculative"] = speculative_chart(ran.speculative)
    if ran.quantization is not None:
        figures["quantization"] = quantization_chart(ran.quantization)
    figures.update(caching_charts(ran.caching))
    predicted = predictions_chart(profile.predictions or [])
    if predicted is not None:
        figures["predictions"] = predicted
    if any(p.published_error for p in profile.predictions or []):
        published = published_chart(validation.points())
        if published is not None:
            figures["published"] = published
    figures.update(insight_charts(profile))
    conversations = conversation_chart(profile.conversations)
    if conversations is not None:
        figures["conversations"] = conversations
    if ran.parallel is not None:
        split = ran.parallel.disaggregation or ran.disaggregation
        if split is not None:
            figures["interference"] = interference_chart(split)
    return figures
