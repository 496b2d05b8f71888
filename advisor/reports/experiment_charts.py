"""Plotly figures of the optional experiments: speculative decoding, quantization,
prefix caching and prefill/decode interference, each from its typed result."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from advisor.reports.caching import bucket_label
from advisor.reports.charts_base import GIB, MIB, PALETTE, Figure, base_layout, finite, y_range
from profiling.caching.results import CachingResult, PrefixPoint, PromptSampleReuse
from profiling.parallel.results import DisaggregationResult
from profiling.quantization.results import MEASURED, QuantizationResult, QuantVariant
from profiling.results import Samples
from profiling.speculative.advice import speedup_interval
from profiling.speculative.results import SpeculativeResult, SweepPoint
from profiling.units import pct, significant, tok_s


def speculative_chart(speculative: SpeculativeResult) -> Figure:
    """Acceptance rate (left axis, solid) and speedup (right axis, dashed) vs draft length K.

    One colour per draft × batch size; the dotted line at 1× is "no faster than plain decode".
    """
    series: dict[tuple[str, int], list[SweepPoint]] = defaultdict(list)
    for sweep in speculative.sweeps:
        series[(sweep.draft, sweep.batch_size)].append(sweep)
    data = []
    for i, ((draft, batch), sweeps) in enumerate(sorted(series.items())):
        sweeps.sort(key=lambda s: s.k)
        colour, name = PALETTE[i % len(PALETTE)], f"{draft}, batch {batch}"
        ks = [s.k for s in sweeps]
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": f"{name}: acceptance",
            "x": ks, "y": [s.acceptance_rate for s in sweeps], "yaxis": "y",
            "line": {"color": colour}, "legendgroup": name,
            "hovertemplate": f"{name}, K=%{{x}}: %{{y:.0%}} accepted<extra></extra>",
        })  # fmt: skip
        intervals = [speedup_interval(s) for s in sweeps]
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": f"{name}: speedup",
            "x": ks, "y": [s.speedup for s in sweeps], "yaxis": "y2",
            "error_y": {"type": "data", "symmetric": False,  # the 95 % interval
                        "array": [iv.high - s.speedup if iv else 0
                                  for iv, s in zip(intervals, sweeps, strict=True)],
                        "arrayminus": [s.speedup - iv.low if iv else 0
                                       for iv, s in zip(intervals, sweeps, strict=True)]},
            "line": {"color": colour, "dash": "dash"}, "marker": {"symbol": "diamond"},
            "legendgroup": name,
            "hovertemplate": f"{name}, K=%{{x}}: %{{y:.2f}}×<extra></extra>",
        })  # fmt: skip
    all_ks = sorted({s.k for group in series.values() for s in group})
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


def _quality_text(variant: QuantVariant) -> str:
    """A variant's quality against the reference, for its hover text ("—" where unknown)."""
    perplexity, kl = variant.perplexity, variant.kl_divergence
    return " · ".join([
        f"perplexity {significant(perplexity)}" if finite(perplexity) else "perplexity —",
        f"top-1 agreement {pct(variant.top1_agreement)}",
        f"KL {significant(kl)} nats" if finite(kl) else "KL —",
    ])  # fmt: skip


def _point_label(variant: QuantVariant) -> str:
    if variant.is_reference:
        return f"{variant.name} (reference)"
    agreement = variant.top1_agreement
    return f"{variant.name} ({pct(agreement)} agree)" if finite(agreement) else variant.name


def _quant_trace(
    variants: list[QuantVariant], key: str, name: str, style: dict[str, Any], unit: str
) -> dict[str, Any]:
    scale = GIB if unit == "GiB" else MIB
    x = [(v.weights_bytes or 0) / scale for v in variants]
    speeds = [getattr(v, key) for v in variants]
    hover = [
        f"{_point_label(v)}, {name}: {tok_s(speed)}, weights {significant(amount)} {unit}"
        f"<br>{_quality_text(v)}"
        for v, speed, amount in zip(variants, speeds, x, strict=True)
    ]
    return {
        "type": "scatter", "mode": "markers", "name": name, "x": x,
        "y": [speed if finite(speed) else None for speed in speeds],
        "marker": {"size": 11, **style},
        "hovertext": hover, "hovertemplate": "%{hovertext}<extra></extra>",
    }  # fmt: skip


def quantization_chart(quantization: QuantizationResult) -> Figure:
    """Weights memory (x) against decode tok/s (y), one point per measured variant.

    Circles are batch 1, diamonds the workload's concurrency. Batch-1 points are
    labelled with the variant and its top-1 agreement with the reference; the hover
    text adds perplexity and KL. Up and to the left is better.
    """
    variants = [
        v for v in quantization.variants if v.status == MEASURED and finite(v.weights_bytes)
    ]
    unit = "GiB" if max((v.weights_bytes or 0 for v in variants), default=0) >= GIB else "MiB"
    concurrency = max((v.concurrency or 1 for v in variants), default=1)
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


def _ms_band(samples: Samples | None) -> tuple[float, float, float] | None:
    """A `Samples` → (median, p90 - median, median - p10) in ms, or None."""
    if samples is None:
        return None
    values = (samples.median, samples.p10, samples.p90)
    if not all(finite(v) for v in values):
        return None
    median, p10, p90 = (v * 1e3 for v in values)
    return median, max(p90 - median, 0.0), max(median - p10, 0.0)


def _ttft_trace(
    points: list[PrefixPoint], key: str, name: str, colour: str, **style: Any
) -> dict[str, Any]:
    bands = [_ms_band(getattr(p, key)) for p in points]
    return {
        "type": "scatter", "mode": "lines+markers", "name": name,
        "x": [100 * p.prefix_share for p in points],
        "y": [b[0] if b else None for b in bands],
        "error_y": {
            "type": "data", "symmetric": False,
            "array": [b[1] if b else 0 for b in bands],
            "arrayminus": [b[2] if b else 0 for b in bands],
        },
        "line": {"color": colour, **style},
        "hovertemplate": f"{name}, %{{x:.0f}} % cached: %{{y:.3g}} ms<extra></extra>",
    }  # fmt: skip


def _labelled_point(
    point: PrefixPoint | None, name: str, symbol: str, colour: str
) -> dict[str, Any] | None:
    """The workload's shared prefix or the user's sample, as one warm marker."""
    if point is None or not finite(point.prefix_share):
        return None
    band = _ms_band(point.warm_ttft_seconds)
    if band is None:
        return None
    return {
        "type": "scatter", "mode": "markers",
        "name": f"{name} ({point.prefix_tokens} tokens), warm",
        "x": [100 * point.prefix_share], "y": [band[0]],
        "marker": {"size": 12, "symbol": symbol, "color": colour},
        "hovertemplate": f"{name}, %{{x:.0f}} % cached: %{{y:.3g}} ms<extra></extra>",
    }  # fmt: skip


def caching_chart(caching: CachingResult) -> Figure:
    """Cold and warm TTFT (ms, median with p10–p90 bars) against the share of the
    prompt whose prefix is cached; the workload's shared prefix and the point measured
    for the user's prompts are extra warm markers."""
    points = sorted(
        (p for p in caching.prefix_sweep if finite(p.prefix_share)), key=lambda p: p.prefix_share
    )
    data = [
        _ttft_trace(points, "cold_ttft_seconds", "cold (whole prompt)", PALETTE[0]),
        _ttft_trace(points, "warm_ttft_seconds", "warm (prefix cached)", PALETTE[1], dash="dash"),
    ]
    sample = caching.prompt_sample
    extra = [
        _labelled_point(caching.shared_prefix, "shared prefix", "diamond", PALETTE[2]),
        _labelled_point(sample.measured if sample else None, "your prompts", "star", PALETTE[3]),
    ]
    data += [trace for trace in extra if trace is not None]
    layout = base_layout(
        f"Prefix caching: TTFT at {caching.prompt_tokens}-token prompts, cold vs warm",
        "share of the prompt already cached (%)",
        "TTFT ms (median, p10–p90)",
    )
    layout["xaxis"].update({"range": [-4, 104], "ticksuffix": " %"})
    layout["yaxis"].update(y_range([y for t in data[:2] for y in t["y"] if y is not None]))
    return {"data": data, "layout": layout}


def prefix_histogram_chart(sample: PromptSampleReuse) -> Figure:
    """How many of the user's prompts reuse a prefix of each length (0 = none)."""
    buckets = sample.shared_prefix_histogram
    unit = "bytes" if sample.tokenization == "bytes" else "tokens"
    data = [{
        "type": "bar", "name": "prompts",
        "x": [bucket_label(b) for b in buckets], "y": [b.prompts for b in buckets],
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


def interference_chart(disaggregation: DisaggregationResult) -> Figure:
    """A decode step alone against one a prefill joins (ms, median with p10–p90 bars),
    with the user's TPOT target as a dashed line when one was set."""
    bars = [
        ("decode alone", disaggregation.decode_alone_seconds, PALETTE[1]),
        ("with a prefill joining", disaggregation.decode_mixed_seconds, PALETTE[5]),
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
    batch, prefill = disaggregation.decode_batch, disaggregation.prefill_tokens
    layout = base_layout(
        f"A decode step of {batch} requests, alone and with a {prefill}-token prefill",
        "",
        "ms per decode step (median, p10–p90)",
        showlegend=False,
    )
    target = disaggregation.tpot_target_seconds
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


def caching_charts(caching: CachingResult | None) -> dict[str, Figure]:
    if caching is None:
        return {}
    figures = {"caching": caching_chart(caching)}
    if caching.prompt_sample is not None:
        figures["caching_sample"] = prefix_histogram_chart(caching.prompt_sample)
    return figures
