"""The charts peers show, drawn from this report's own measurements:
- a roofline: each measured prefill and decode point at its arithmetic intensity and
  achieved FLOP/s, under the ceilings measured here (and the datasheet's, where the
  device is in the catalog), with the ridge point;
- latency against throughput over the measured batch sizes, with the TPOT target;
- the speculative draft's accepted-length histogram;
- quantization quality against weight memory.
"""

from __future__ import annotations

import math
from typing import Any

from advisor.reports.charts_base import MIB, PALETTE, Figure, base_layout, finite
from advisor.reports.whatif import shapes_of
from profiling.measure import hardware
from profiling.profile import Profile
from profiling.quantization.results import MEASURED, QuantizationResult
from profiling.speculative.results import SpeculativeResult


def _gpu(profile: Profile) -> hardware.GPU | None:
    kind = profile.environment.gpu_kind
    return hardware.catalog().get(kind) if kind else None


def roofline_points(profile: Profile) -> dict[str, list[tuple[float, float, str]]]:
    """(FLOP per byte, achieved FLOP/s, label) of every measured prefill and decode point."""
    shapes, _ = shapes_of(profile)
    dtype = profile.environment.dtype or "float32"
    weights, kv = shapes.weights_bytes(dtype), shapes.kv_bytes_per_token(dtype)
    prefill = []
    for p in profile.prefill:  # the measured run's own bytes and FLOPs where it kept them
        moved = p.bytes_moved or weights + kv * p.prompt_tokens * p.batch_size
        label = f"prefill {p.prompt_tokens} tokens × {p.batch_size}"
        prefill.append((p.flops / moved, p.achieved_flops_per_second, label))
    decode = []
    for p in profile.decode:
        flops = p.flops_per_step or shapes.decode_flops(p.batch_size, p.context_tokens)
        rate = flops / p.seconds_per_token.median
        decode.append((flops / p.bytes_per_step, rate, f"decode batch {p.batch_size}, "
                       f"context {p.context_tokens}"))  # fmt: skip
    return {"prefill": prefill, "decode": decode}


def roofline_chart(profile: Profile) -> Figure | None:
    points = roofline_points(profile)
    every = points["prefill"] + points["decode"]
    if not every:
        return None
    # The measured ceilings: the best FLOP/s and the best bytes/s seen on this device.
    best_flops = max(rate for _, rate, _ in every)
    best_bytes = max((p.achieved_bytes_per_second for p in profile.decode), default=0.0) or max(
        rate / intensity for intensity, rate, _ in every
    )
    low = min(i for i, _, _ in every) / 4
    high = max(i for i, _, _ in every) * 4
    data = []
    for i, (name, rows) in enumerate(points.items()):
        data.append({
            "type": "scatter", "mode": "markers", "name": f"{name} (measured)",
            "x": [x for x, _, _ in rows], "y": [y for _, y, _ in rows],
            "text": [t for _, _, t in rows], "marker": {"color": PALETTE[i], "size": 9},
            "hovertemplate": "%{text}: %{x:.3g} FLOP/byte, %{y:.3g} FLOP/s<extra></extra>",
        })  # fmt: skip
    data.append(_roof("ceilings measured here", best_flops, best_bytes, low, high, "#555", "dot"))
    gpu = _gpu(profile)
    note = "ceilings: the best FLOP/s and bytes/s measured on this device"
    if gpu is not None and gpu.peak_flops(profile.environment.dtype):
        peak = gpu.peak_flops(profile.environment.dtype) or 0.0
        bandwidth = gpu.memory_bandwidth_bytes_per_second
        data.append(_roof(f"{gpu.label} datasheet", peak, bandwidth, low, high, "#000", "solid"))
        note += f"; ridge of the datasheet at {peak / bandwidth:.3g} FLOP/byte"
    ridge = best_flops / best_bytes if best_bytes else None
    layout = base_layout(
        "Roofline: achieved FLOP/s against arithmetic intensity",
        "arithmetic intensity (FLOP per byte moved)",
        "achieved FLOP/s",
        height=420,
    )
    layout["xaxis"]["type"] = "log"
    layout["yaxis"].update({"type": "log", "rangemode": "normal"})
    if ridge:
        layout["annotations"] = [{
            "x": math.log10(ridge), "y": math.log10(best_flops), "xref": "x", "yref": "y",
            "text": f"measured ridge {ridge:.3g} FLOP/byte", "showarrow": True, "ay": -30,
        }]  # fmt: skip
    layout["meta"] = {"note": note}
    return {"data": data, "layout": layout}


def _roof(name: str, flops: float, bandwidth: float, low: float, high: float,
          colour: str, dash: str) -> dict[str, Any]:  # fmt: skip
    ridge = flops / bandwidth
    xs = [low, ridge, max(high, ridge * 2)] if low < ridge else [low, high]
    ys = [min(flops, bandwidth * x) for x in xs]
    return {
        "type": "scatter", "mode": "lines", "name": name, "x": xs, "y": ys,
        "line": {"color": colour, "dash": dash, "width": 1.5}, "hoverinfo": "skip",
    }  # fmt: skip


def latency_throughput_chart(profile: Profile) -> Figure | None:
    """TPOT against decode throughput, one point per measured batch size (static batches
    in eager mode, not a serving engine's), at the context nearest the workload's."""
    if not profile.decode:
        return None
    work = profile.config.workload
    context = work.prompt_tokens + work.output_tokens // 2
    nearest = min({p.context_tokens for p in profile.decode}, key=lambda c: abs(c - context))
    series = sorted(
        (p for p in profile.decode if p.context_tokens == nearest), key=lambda p: p.batch_size
    )
    p10 = [p.seconds_per_token.p10 * 1e3 for p in series]
    p90 = [p.seconds_per_token.p90 * 1e3 for p in series]
    median = [p.seconds_per_token.median * 1e3 for p in series]
    data = [{
        "type": "scatter", "mode": "lines+markers+text", "name": f"context {nearest:,}",
        "x": [p.tokens_per_second for p in series], "y": median,
        "text": [f"batch {p.batch_size}" for p in series], "textposition": "top center",
        "error_y": {"type": "data", "symmetric": False,
                    "array": [h - m for h, m in zip(p90, median, strict=True)],
                    "arrayminus": [m - lo for m, lo in zip(median, p10, strict=True)]},
        "marker": {"color": PALETTE[0], "size": 8},
        "hovertemplate": "%{text}: %{x:.3g} tok/s, TPOT %{y:.3g} ms (p50; bars p10–p90)"
                         "<extra></extra>",
    }]  # fmt: skip
    layout = base_layout(
        "Latency against throughput over batch size (measured, static batches)",
        "decode throughput, all rows (tok/s)",
        "time per output token (ms)",
    )
    if work.tpot_ms:
        layout["shapes"] = [{
            "type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
            "y0": work.tpot_ms, "y1": work.tpot_ms, "line": {"color": "#D55E00", "dash": "dash"},
        }]  # fmt: skip
        layout["annotations"] = [{
            "xref": "paper", "x": 1, "y": work.tpot_ms, "yref": "y", "showarrow": False,
            "text": f"your TPOT target {work.tpot_ms:g} ms",
            "xanchor": "right", "yanchor": "bottom",
        }]  # fmt: skip
    return {"data": data, "layout": layout}


def accepted_length_chart(speculative: SpeculativeResult) -> Figure | None:
    """How many drafted tokens each target pass kept, for each draft's best K at batch 1
    (from the share of passes accepting position i: P(kept = i) = P(≥ i) − P(≥ i+1))."""
    best = {(b.draft, b.batch_size): b.k for b in speculative.best_k}
    chosen = [s for s in speculative.sweeps if best.get((s.draft, s.batch_size)) == s.k]
    chosen = [s for s in chosen if s.batch_size == min(p.batch_size for p in chosen)]
    if not chosen:
        return None
    data = []
    for i, s in enumerate(chosen):
        at_least = [1.0, *s.acceptance_by_position, 0.0]
        shares = [max(0.0, at_least[n] - at_least[n + 1]) for n in range(s.k + 1)]
        data.append({
            "type": "bar", "name": f"{s.draft}, K={s.k}", "x": list(range(s.k + 1)),
            "y": shares, "marker": {"color": PALETTE[i % len(PALETTE)]},
            "hovertemplate": f"{s.draft}, K={s.k}: %{{y:.0%}} of passes kept %{{x}}"
                             "<extra></extra>",
        })  # fmt: skip
    layout = base_layout(
        "Drafted tokens kept per target pass (best K, batch 1)",
        "drafted tokens accepted in a pass",
        "share of passes",
        barmode="group",
    )
    layout["yaxis"]["tickformat"] = ".0%"
    layout["xaxis"]["dtick"] = 1
    return {"data": data, "layout": layout}


def quality_memory_chart(quantization: QuantizationResult) -> Figure | None:
    """Top-1 agreement with the reference against weight memory, one point per variant."""
    rows = [
        v for v in quantization.variants
        if v.status == MEASURED and finite(v.weights_bytes) and finite(v.top1_agreement)
    ]  # fmt: skip
    if not rows or not quantization.quality_meaningful:
        return None
    data = [{
        "type": "scatter", "mode": "markers+text", "name": "variants",
        "x": [v.weights_bytes / MIB for v in rows], "y": [v.top1_agreement for v in rows],
        "text": [v.name for v in rows], "textposition": "top center",
        "marker": {"color": PALETTE[2], "size": 10},
        "hovertemplate": "%{text}: %{x:.3g} MiB, %{y:.1%} top-1 agreement<extra></extra>",
    }]  # fmt: skip
    layout = base_layout(
        "Quality against memory: top-1 agreement with the reference",
        "weights (MiB)",
        "top-1 agreement",
    )
    layout["yaxis"].update({"tickformat": ".0%", "rangemode": "normal"})
    return {"data": data, "layout": layout}


def insight_charts(profile: Profile) -> dict[str, Figure]:
    figures: dict[str, Figure | None] = {
        "roofline": roofline_chart(profile),
        "latency": latency_throughput_chart(profile),
    }
    ran = profile.experiments
    if ran.speculative is not None and ran.speculative.sweeps:
        figures["accepted"] = accepted_length_chart(ran.speculative)
    if ran.quantization is not None:
        figures["quality"] = quality_memory_chart(ran.quantization)
    return {name: figure for name, figure in figures.items() if figure is not None}
