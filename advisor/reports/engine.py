"""The engine section: what vLLM measured at the user's workload, and the command to run.

Built from the typed `EngineResult`. The recommended configuration is the
reference server's flags plus those of every recommendation the engine's
measurements made, so the command is exactly what was measured to help.
"""

from __future__ import annotations

import shlex
from typing import Any

from advisor.reports.charts_base import PALETTE, Figure, base_layout
from profiling.engine.advice import recommended_flags
from profiling.engine.results import EngineResult, ServingPoint
from profiling.technique_kit.advice_results import Advice

SPREADS = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")


def _interval(bounds: Any) -> str:
    return f"{bounds[0]:.2f}–{bounds[1]:.2f}×" if bounds else "—"


def _basis_interval(point: Any) -> str:
    """The interval of a TPOT speedup (`techniques.tpot_speedup`), or what it is of."""
    if point is None:
        return ""
    if point.speedup_basis == "server":
        return ("of the server's mean TPOT: no request reached the client as it was generated, "
                "so the client's timings cannot compare them")  # fmt: skip
    return _interval(point.interval)


def serving_rows(points: list[ServingPoint]) -> list[dict[str, Any]]:
    return [{"p": p, "streamed": p.requests - p.coalesced} for p in points]


def recommended_command(engine: EngineResult, advice: Advice | None) -> str:
    flags = recommended_flags(engine, advice.recommendations) if advice else []
    if not flags:
        return engine.serve_command
    base = shlex.split(engine.serve_command)
    for name in flags[::2]:  # a later flag replaces the reference's own (--dtype)
        if name in base:
            at = base.index(name)
            del base[at : at + 2]
    return shlex.join([*base, *flags])


def curve(engine: EngineResult) -> Figure | None:
    """The latency–throughput curve of the sweep: TPOT against output tokens per second,
    one marker per concurrency, p50 with its p90 above."""
    points = sorted(engine.serving, key=lambda p: p.concurrency)
    if not points:
        return None
    x = [p.output_tokens_per_s for p in points]
    data = []
    for i, (name, pick) in enumerate((("p50", lambda s: s.p50), ("p90", lambda s: s.p90))):
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": f"TPOT {name}",
            "x": x, "y": [pick(p.tpot_ms) for p in points],
            "text": [f"concurrency {p.concurrency}" for p in points],
            "line": {"color": PALETTE[i], "dash": "solid" if i == 0 else "dot"},
            "hovertemplate": "%{text}: %{x:.4g} tok/s, %{y:.3g} ms<extra></extra>",
        })  # fmt: skip
    layout = base_layout(
        f"{engine.name} {engine.version}: latency against throughput",
        "output tokens per second (all requests)", "TPOT (ms)",
    )  # fmt: skip
    return {"data": data, "layout": layout}


def section_context(engine: EngineResult | None, advice: Advice | None) -> dict[str, Any] | None:
    if engine is None:
        return None
    caching = engine.prefix_caching
    return {
        "raw": engine,
        "serving": serving_rows(engine.serving),
        "coalesced": sum(p.coalesced for p in engine.serving),
        "command": recommended_command(engine, advice),
        "chart": curve(engine),
        "caching_interval": _interval(caching.interval) if caching else "",
        "speculative": [  # fmt: skip
            {
                "s": s,
                "interval": _basis_interval(s),
                "at_c": _interval(s.interval_at_concurrency),
            }
            for s in engine.speculative
        ],
        "quantization": [{"q": q, "interval": _interval(q.interval)} for q in engine.quantization],
        "tp_interval": _basis_interval(engine.tensor_parallel),
        "finding": finding(engine),
    }


def finding(engine: EngineResult) -> str:
    if not engine.serving:
        return engine.failures[0] if engine.failures else "the engine did not run"
    failed = len(engine.failures)
    text = f"{engine.name} {engine.version}: {len(engine.serving)} concurrencies measured"
    return text + (f", {failed} configuration{'s' * (failed != 1)} failed" if failed else "")
