"""Plotly figures for the report, as plain dicts (`{"data": [...], "layout": {...}}`).

The page receives them through `json_script` and draws them with plotly.js;
no plotly Python objects are needed. Units on the axes are the report's:
GB (1e9 B), ms, tok/s.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from advisor.reports.templatetags.units import pct, significant, tok_s
from profiling.results import DecodePoint, PrefillPoint, Profile

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
    return figures
