"""Plotly figures of the optional experiments: speculative decoding, quantization,
prefix caching and prefill/decode interference (plain dicts, as in `charts`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from advisor.reports.caching import bucket_label
from advisor.reports.charts_base import GB, PALETTE, Figure, base_layout, finite, y_range
from profiling.units import pct, significant, tok_s


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
    layout = base_layout(
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


def _quality_text(variant: dict[str, Any]) -> str:
    """A variant's quality against the reference, for its hover text ("—" where unknown)."""
    perplexity, kl = variant.get("perplexity"), variant.get("kl_divergence")
    return " · ".join([
        f"perplexity {significant(perplexity)}" if finite(perplexity) else "perplexity —",
        f"top-1 agreement {pct(variant.get('top1_agreement'))}",
        f"KL {significant(kl)} nats" if finite(kl) else "KL —",
    ])  # fmt: skip


def _point_label(variant: dict[str, Any]) -> str:
    name = str(variant.get("name"))
    if variant.get("is_reference"):
        return f"{name} (reference)"
    agreement = variant.get("top1_agreement")
    return f"{name} ({pct(agreement)} agree)" if finite(agreement) else name


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
        "y": [v.get(key) if finite(v.get(key)) else None for v in variants],
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
        if isinstance(v, dict) and v.get("status") == "measured" and finite(v.get("weights_bytes"))
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
    layout = base_layout(
        "Quantization: weights memory vs decode speed", f"weights ({unit})", "tok/s"
    )
    layout["xaxis"].update({"rangemode": "tozero"})
    return {"data": data, "layout": layout}


# Prefix caching -----------------------------------------------------------------------


def _ms_band(samples: Any) -> tuple[float, float, float] | None:
    """A serialised `Samples` → (median, p90 - median, median - p10) in ms, or None."""
    if not isinstance(samples, dict):
        return None
    values = [samples.get(key) for key in ("median", "p10", "p90")]
    if not all(finite(v) for v in values):
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
    if not isinstance(point, dict) or not finite(point.get("prefix_share")):
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
         if isinstance(p, dict) and finite(p.get("prefix_share"))),
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
    layout = base_layout(
        f"Prefix caching: TTFT at {tokens}-token prompts, cold vs warm",
        "share of the prompt already cached (%)",
        "TTFT ms (median, p10–p90)",
    )
    layout["xaxis"].update({"range": [-4, 104], "ticksuffix": " %"})
    layout["yaxis"].update(y_range([y for t in data[:2] for y in t["y"] if y is not None]))
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
    layout = base_layout(
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
    layout = base_layout(
        f"A decode step of {batch} requests, alone and with a {prefill}-token prefill",
        "",
        "ms per decode step (median, p10–p90)",
        showlegend=False,
    )
    target = disaggregation.get("tpot_target_seconds")
    if finite(target):
        layout["shapes"] = [{
            "type": "line", "xref": "paper", "x0": 0, "x1": 1,
            "y0": target * 1e3, "y1": target * 1e3,
            "line": {"color": "#333", "width": 2, "dash": "dash"},
            "label": {"text": f"TPOT target {significant(target * 1e3)} ms",
                      "textposition": "end"},
        }]  # fmt: skip
    return {"data": data, "layout": layout}


# Predictions ------------------------------------------------------------------------------


def caching_charts(caching: Any) -> dict[str, Figure]:
    if not isinstance(caching, dict):
        return {}
    figures = {"caching": caching_chart(caching)}
    if isinstance(caching.get("prompt_sample"), dict):
        figures["caching_sample"] = prefix_histogram_chart(caching["prompt_sample"])
    return figures
