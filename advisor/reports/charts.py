"""Plotly figures for the report, as plain dicts (`{"data": [...], "layout": {...}}`).

The page receives them through `json_script` and draws them with plotly.js;
no plotly Python objects are needed. Units on the axes are the report's:
GB (1e9 B), ms, tok/s.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from advisor.reports.caching import bucket_label
from profiling.results import DecodePoint, PrefillPoint, Profile
from profiling.units import pct, significant, tok_s

Figure = dict[str, Any]

GB = 1e9
# Colour-blind-safe (Okabe–Ito), in the order lines are drawn.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
MEMORY_COLOURS = {"weights": "#0072B2", "kv": "#E69F00", "free": "#B8E0C8", "reserve": "#D9D9D9"}


def _layout(title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    layout = {
        "title": {"text": title, "font": {"size": 15}},
        "xaxis": {"title": {"text": x_title}, "zeroline": False},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
        "margin": {"l": 64, "r": 16, "t": 48, "b": 56},
        "legend": {"orientation": "h", "y": -0.25},
        "height": 360,
        "font": {"family": "system-ui, sans-serif", "size": 12},
        "paper_bgcolor": "rgba(0,0,0,0)",
    }
    layout.update(extra)
    return layout


def _sweep_axis(values: list[float]) -> dict[str, Any]:
    """Ticks at the measured sizes; a log axis when they span 8× or more (they double)."""
    ticks = sorted(set(values))
    axis: dict[str, Any] = {"tickvals": ticks, "ticktext": [f"{v:,}" for v in ticks]}
    if ticks and ticks[0] > 0 and ticks[-1] / ticks[0] >= 8:
        axis["type"] = "log"
    return axis


def _y_range(medians: list[float]) -> dict[str, Any]:
    """Room for the medians; a wild p90 bar runs off the top rather than squash the lines."""
    top = max(medians, default=0.0)
    return {"range": [0, top * 1.5]} if top > 0 else {}


# Memory -------------------------------------------------------------------------


def _memory_bar(name: str, gb: float, colour: str) -> dict[str, Any]:
    return {
        "type": "bar",
        "orientation": "h",
        "name": name,
        "y": ["memory"],
        "x": [gb],
        "marker": {"color": colour},
        "hovertemplate": f"{name}: %{{x:.3g}} GB<extra></extra>",
    }


def memory_chart(profile: Profile) -> Figure:
    """Weights + KV cache for the workload, against the target GPU's usable memory."""
    memory, fit, work = profile.memory, profile.memory.fit, profile.config.workload
    if fit is None:
        kv = memory.kv_cache_bytes_per_token * work.concurrency * work.context_tokens
        data = [
            _memory_bar("Weights", memory.weights_bytes / GB, MEMORY_COLOURS["weights"]),
            _memory_bar(f"KV cache ({work.concurrency} × {work.context_tokens} tokens)",
                        kv / GB, MEMORY_COLOURS["kv"]),
        ]  # fmt: skip
        title, shapes = "Memory needed (no target GPU chosen)", []
    else:
        data = [
            _memory_bar("Weights", fit.weights_bytes / GB, MEMORY_COLOURS["weights"]),
            _memory_bar(f"KV cache ({fit.concurrency} × {fit.context_tokens} tokens)",
                        fit.kv_cache_bytes / GB, MEMORY_COLOURS["kv"]),
            _memory_bar("Free", max(fit.available_bytes - fit.required_bytes, 0) / GB,
                        MEMORY_COLOURS["free"]),
        ]  # fmt: skip
        reserve = fit.device_memory_bytes * fit.gpu_count - fit.available_bytes
        if reserve > 0 and fit.required_bytes <= fit.available_bytes:
            data.append(_memory_bar("Reserved (activations, runtime)", reserve / GB,
                                    MEMORY_COLOURS["reserve"]))  # fmt: skip
        verdict = "fits" if fit.fits else "does not fit"
        # Small models are a sliver of a big GPU: say the share, since the bar cannot.
        share = pct(fit.required_bytes / fit.available_bytes) if fit.available_bytes > 0 else "—"
        title = f"Memory on {fit.gpu_count} × {fit.gpu_kind}: {verdict} ({share} of usable needed)"
        shapes = [_usable_line(fit.available_bytes / GB)]
    layout = _layout(title, "GB", "", barmode="stack", height=230, shapes=shapes)
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
    layout = _layout("Prefill latency vs prompt length", "prompt tokens", "ms (median, p10–p90)")
    layout["xaxis"].update(_sweep_axis([p.prompt_tokens for p in points]))
    layout["yaxis"].update(_y_range([p.seconds.median * 1e3 for p in points]))
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
    layout = _layout("Decode throughput vs batch size", "batch size (concurrent requests)", "tok/s")
    layout["xaxis"].update(_sweep_axis([p.batch_size for p in points]))
    layout["yaxis"].update(_y_range([p.tokens_per_second for p in points]))
    return {"data": data, "layout": layout}


# Speculative decoding ---------------------------------------------------------------


def speculative_chart(speculative: dict[str, Any]) -> Figure:
    """Acceptance rate (left axis, solid) and speedup (right axis, dashed) vs draft length K.

    One colour per draft × batch size; the dotted line at 1× is "no faster than plain decode".
    """
    series: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for sweep in speculative.get("sweeps") or []:
        series[(str(sweep.get("draft")), int(sweep.get("batch_size") or 0))].append(sweep)
    data = []
    for i, ((draft, batch), sweeps) in enumerate(sorted(series.items())):
        sweeps.sort(key=lambda s: s.get("k") or 0)
        colour, name = PALETTE[i % len(PALETTE)], f"{draft}, batch {batch}"
        ks = [s.get("k") for s in sweeps]
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": f"{name}: acceptance",
            "x": ks, "y": [s.get("acceptance_rate") for s in sweeps], "yaxis": "y",
            "line": {"color": colour}, "legendgroup": name,
            "hovertemplate": f"{name}, K=%{{x}}: %{{y:.0%}} accepted<extra></extra>",
        })  # fmt: skip
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": f"{name}: speedup",
            "x": ks, "y": [s.get("speedup") for s in sweeps], "yaxis": "y2",
            "line": {"color": colour, "dash": "dash"}, "marker": {"symbol": "diamond"},
            "legendgroup": name,
            "hovertemplate": f"{name}, K=%{{x}}: %{{y:.2f}}×<extra></extra>",
        })  # fmt: skip
    all_ks = sorted({s.get("k") for group in series.values() for s in group if s.get("k")})
    layout = _layout(
        "Speculative decoding: acceptance and speedup vs K",
        "draft length K (tokens proposed per step)",
        "acceptance rate (solid)",
        height=420,
    )
    layout["xaxis"].update({"tickvals": all_ks})
    layout["yaxis"].update({"range": [0, 1.05], "tickformat": ".0%"})
    layout["yaxis2"] = {
        "title": {"text": "speedup × (dashed)"},
        "overlaying": "y",
        "side": "right",
        "rangemode": "tozero",
    }
    layout["margin"] = {**layout["margin"], "r": 64}
    layout["shapes"] = [{
        "type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y2", "y0": 1, "y1": 1,
        "line": {"color": "#333", "width": 1, "dash": "dot"},
    }]  # fmt: skip
    return {"data": data, "layout": layout}


# Quantization ----------------------------------------------------------------------


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _quality_text(variant: dict[str, Any]) -> str:
    """A variant's quality against the reference, for its hover text ("—" where unknown)."""
    perplexity, kl = variant.get("perplexity"), variant.get("kl_divergence")
    return " · ".join([
        f"perplexity {significant(perplexity)}" if _finite(perplexity) else "perplexity —",
        f"top-1 agreement {pct(variant.get('top1_agreement'))}",
        f"KL {significant(kl)} nats" if _finite(kl) else "KL —",
    ])  # fmt: skip


def _point_label(variant: dict[str, Any]) -> str:
    name = str(variant.get("name"))
    if variant.get("is_reference"):
        return f"{name} (reference)"
    agreement = variant.get("top1_agreement")
    return f"{name} ({pct(agreement)} agree)" if _finite(agreement) else name


def _quant_trace(
    variants: list[dict[str, Any]], key: str, name: str, style: dict[str, Any], unit: str
) -> dict[str, Any]:
    scale = GB if unit == "GB" else 1e6
    x = [v["weights_bytes"] / scale for v in variants]
    hover = [
        f"{_point_label(v)}, {name}: {tok_s(v.get(key))}, weights {significant(amount)} {unit}"
        f"<br>{_quality_text(v)}"
        for v, amount in zip(variants, x, strict=True)
    ]
    return {
        "type": "scatter", "mode": "markers", "name": name, "x": x,
        "y": [v.get(key) if _finite(v.get(key)) else None for v in variants],
        "marker": {"size": 11, **style},
        "hovertext": hover, "hovertemplate": "%{hovertext}<extra></extra>",
    }  # fmt: skip


def quantization_chart(quantization: dict[str, Any]) -> Figure:
    """Weights memory (x) against decode tok/s (y), one point per measured variant.

    Circles are batch 1, diamonds the workload's concurrency. Batch-1 points are
    labelled with the variant and its top-1 agreement with the reference; the hover
    text adds perplexity and KL. Up and to the left is better.
    """
    variants = [
        v for v in quantization.get("variants") or []
        if isinstance(v, dict) and v.get("status") == "measured" and _finite(v.get("weights_bytes"))
    ]  # fmt: skip
    unit = "GB" if max((v["weights_bytes"] for v in variants), default=0) >= GB else "MB"
    concurrency = max((int(v.get("concurrency") or 1) for v in variants), default=1)
    batch_1 = _quant_trace(
        variants, "tokens_per_second", "batch 1", {"color": PALETTE[0], "symbol": "circle"}, unit
    )
    batch_1.update({
        "mode": "markers+text", "text": [_point_label(v) for v in variants],
        "textposition": "top center",
    })  # fmt: skip
    data = [batch_1]
    if concurrency > 1:
        style = {"color": PALETTE[1], "symbol": "diamond"}
        key = "concurrency_tokens_per_second"
        data.append(_quant_trace(variants, key, f"batch {concurrency}", style, unit))
    layout = _layout("Quantization: weights memory vs decode speed", f"weights ({unit})", "tok/s")
    layout["xaxis"].update({"rangemode": "tozero"})
    return {"data": data, "layout": layout}


# Prefix caching -----------------------------------------------------------------------


def _ms_band(samples: Any) -> tuple[float, float, float] | None:
    """A serialised `Samples` → (median, p90 - median, median - p10) in ms, or None."""
    if not isinstance(samples, dict):
        return None
    values = [samples.get(key) for key in ("median", "p10", "p90")]
    if not all(_finite(v) for v in values):
        return None
    median, p10, p90 = (v * 1e3 for v in values)
    return median, max(p90 - median, 0.0), max(median - p10, 0.0)


def _ttft_trace(
    points: list[dict[str, Any]], key: str, name: str, colour: str, **style: Any
) -> dict[str, Any]:
    bands = [_ms_band(p.get(key)) for p in points]
    return {
        "type": "scatter", "mode": "lines+markers", "name": name,
        "x": [100 * p["prefix_share"] for p in points],
        "y": [b[0] if b else None for b in bands],
        "error_y": {
            "type": "data", "symmetric": False,
            "array": [b[1] if b else 0 for b in bands],
            "arrayminus": [b[2] if b else 0 for b in bands],
        },
        "line": {"color": colour, **style},
        "hovertemplate": f"{name}, %{{x:.0f}} % cached: %{{y:.3g}} ms<extra></extra>",
    }  # fmt: skip


def _labelled_point(point: Any, name: str, symbol: str, colour: str) -> dict[str, Any] | None:
    """The workload's shared prefix or the user's sample, as one warm marker."""
    if not isinstance(point, dict) or not _finite(point.get("prefix_share")):
        return None
    band = _ms_band(point.get("warm_ttft_seconds"))
    if band is None:
        return None
    tokens = point.get("prefix_tokens")
    return {
        "type": "scatter", "mode": "markers", "name": f"{name} ({tokens} tokens), warm",
        "x": [100 * point["prefix_share"]], "y": [band[0]],
        "marker": {"size": 12, "symbol": symbol, "color": colour},
        "hovertemplate": f"{name}, %{{x:.0f}} % cached: %{{y:.3g}} ms<extra></extra>",
    }  # fmt: skip


def caching_chart(caching: dict[str, Any]) -> Figure:
    """Cold and warm TTFT (ms, median with p10–p90 bars) against the share of the
    prompt whose prefix is cached; the workload's shared prefix and the point measured
    for the user's prompts are extra warm markers."""
    points = sorted(
        (p for p in caching.get("prefix_sweep") or []
         if isinstance(p, dict) and _finite(p.get("prefix_share"))),
        key=lambda p: p["prefix_share"],
    )  # fmt: skip
    data = [
        _ttft_trace(points, "cold_ttft_seconds", "cold (whole prompt)", PALETTE[0]),
        _ttft_trace(points, "warm_ttft_seconds", "warm (prefix cached)", PALETTE[1], dash="dash"),
    ]
    sample = caching.get("prompt_sample")
    extra = [
        _labelled_point(caching.get("shared_prefix"), "shared prefix", "diamond", PALETTE[2]),
        _labelled_point(
            sample.get("measured") if isinstance(sample, dict) else None,
            "your prompts", "star", PALETTE[3],
        ),
    ]  # fmt: skip
    data += [trace for trace in extra if trace is not None]
    tokens = caching.get("prompt_tokens")
    layout = _layout(
        f"Prefix caching: TTFT at {tokens}-token prompts, cold vs warm",
        "share of the prompt already cached (%)",
        "TTFT ms (median, p10–p90)",
    )
    layout["xaxis"].update({"range": [-4, 104], "ticksuffix": " %"})
    layout["yaxis"].update(_y_range([y for t in data[:2] for y in t["y"] if y is not None]))
    return {"data": data, "layout": layout}


def prefix_histogram_chart(sample: dict[str, Any]) -> Figure:
    """How many of the user's prompts reuse a prefix of each length (0 = none)."""
    buckets = [b for b in sample.get("shared_prefix_histogram") or [] if isinstance(b, dict)]
    unit = "bytes" if sample.get("tokenization") == "bytes" else "tokens"
    data = [{
        "type": "bar", "name": "prompts",
        "x": [bucket_label(b) for b in buckets], "y": [b.get("prompts") for b in buckets],
        "marker": {"color": PALETTE[2]},
        "hovertemplate": f"%{{x}} {unit} reused: %{{y}} prompts<extra></extra>",
    }]  # fmt: skip
    layout = _layout(
        "Your prompts: the prefix each reuses from earlier ones",
        f"reused prefix ({unit})",
        "prompts",
        height=260,
        showlegend=False,
    )
    layout["xaxis"].update({"type": "category"})
    return {"data": data, "layout": layout}


# Disaggregation ------------------------------------------------------------------------


def interference_chart(disaggregation: dict[str, Any]) -> Figure:
    """A decode step alone against one a prefill joins (ms, median with p10–p90 bars),
    with the user's TPOT target as a dashed line when one was set."""
    bars = [
        ("decode alone", disaggregation.get("decode_alone_seconds"), PALETTE[1]),
        ("with a prefill joining", disaggregation.get("decode_mixed_seconds"), PALETTE[5]),
    ]
    bands = [_ms_band(samples) for _, samples, _ in bars]
    data = [{
        "type": "bar", "name": "decode step",
        "x": [name for name, _, _ in bars], "y": [b[0] if b else None for b in bands],
        "error_y": {
            "type": "data", "symmetric": False,
            "array": [b[1] if b else 0 for b in bands],
            "arrayminus": [b[2] if b else 0 for b in bands],
        },
        "marker": {"color": [colour for _, _, colour in bars]},
        "hovertemplate": "%{x}: %{y:.3g} ms<extra></extra>",
    }]  # fmt: skip
    batch, prefill = disaggregation.get("decode_batch"), disaggregation.get("prefill_tokens")
    layout = _layout(
        f"A decode step of {batch} requests, alone and with a {prefill}-token prefill",
        "",
        "ms per decode step (median, p10–p90)",
        showlegend=False,
    )
    target = disaggregation.get("tpot_target_seconds")
    if _finite(target):
        layout["shapes"] = [{
            "type": "line", "xref": "paper", "x0": 0, "x1": 1,
            "y0": target * 1e3, "y1": target * 1e3,
            "line": {"color": "#333", "width": 2, "dash": "dash"},
            "label": {"text": f"TPOT target {significant(target * 1e3)} ms",
                      "textposition": "end"},
        }]  # fmt: skip
    return {"data": data, "layout": layout}


# Predictions ------------------------------------------------------------------------------

PREDICTION_SERIES = {
    "prefill_seconds": ("prefill (left out of its fit)", "circle"),
    "decode_seconds_per_step": ("decode step (left out of its fit)", "diamond"),
    "ttft_seconds": ("your workload: TTFT", "star"),
    "tpot_seconds": ("your workload: TPOT", "square"),
}


def predictions_chart(points: list[dict[str, Any]]) -> Figure | None:
    """Predicted against measured times (ms, log-log), one marker per point; on the dotted
    y = x line a prediction is exact. None when no time was both predicted and measured."""
    timed = [
        p for p in points
        if isinstance(p, dict) and p.get("unit") == "s" and p.get("metric") in PREDICTION_SERIES
        and _finite(p.get("measured")) and _finite(p.get("predicted"))
        and p["measured"] > 0 and p["predicted"] > 0
    ]  # fmt: skip
    if not timed:
        return None
    data = []
    for i, (metric, (name, symbol)) in enumerate(PREDICTION_SERIES.items()):
        series = [p for p in timed if p["metric"] == metric]
        if not series:
            continue
        data.append({
            "type": "scatter", "mode": "markers", "name": name,
            "x": [p["measured"] * 1e3 for p in series], "y": [p["predicted"] * 1e3 for p in series],
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
    layout = _layout("Predicted against measured", "measured ms", "predicted ms")
    layout["xaxis"].update({"type": "log"})
    layout["yaxis"] = {**layout["yaxis"], "type": "log", "rangemode": "normal"}
    return {"data": data, "layout": layout}


def all_charts(profile: Profile) -> dict[str, Figure]:
    figures = {
        "memory": memory_chart(profile),
        "prefill": prefill_chart(profile.prefill),
        "decode": decode_chart(profile.decode),
    }
    if isinstance(profile.experiments.get("speculative"), dict):
        figures["speculative"] = speculative_chart(profile.experiments["speculative"])
    if isinstance(profile.experiments.get("quantization"), dict):
        figures["quantization"] = quantization_chart(profile.experiments["quantization"])
    figures.update(_caching_charts(profile.experiments.get("caching")))
    predicted = predictions_chart(profile.predictions or [])
    if predicted is not None:
        figures["predictions"] = predicted
    parallel = profile.experiments.get("parallel")
    if isinstance(parallel, dict):
        split = parallel.get("disaggregation") or profile.experiments.get("disaggregation")
        if isinstance(split, dict):
            figures["interference"] = interference_chart(split)
    return figures


def _caching_charts(caching: Any) -> dict[str, Figure]:
    if not isinstance(caching, dict):
        return {}
    figures = {"caching": caching_chart(caching)}
    if isinstance(caching.get("prompt_sample"), dict):
        figures["caching_sample"] = prefix_histogram_chart(caching["prompt_sample"])
    return figures
