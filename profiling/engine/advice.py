"""The engine's measurements as advice: each technique vLLM ran, judged on its figures.

Where the engine measured a technique, its outcome replaces the eager-mode one
for speculative decoding and prefix caching (the engine is what the user
deploys) and joins the eager ones for quantization (the engine runs fp8, the
eager experiment the weight-only formats). "Before" is always the report's own
figure at the user's workload: the engine's reference server, which is the
verdict's measurement. A gain needs its whole 95 % interval, resampled over
requests, at or above MIN_GAIN (`rule_kit.judged`), as every measured effect.
"""

from __future__ import annotations

import shlex
from typing import Any

from profiling.engine import ENGINES
from profiling.engine.engine_verdict import point_at
from profiling.engine.results import EngineResult, PrefixCachingResult, ServingPoint
from profiling.measure.stats import Interval
from profiling.technique_kit.advice_results import (
    Change,
    Evidence,
    ExpectedEffect,
    NotRecommended,
    QualityTolerance,
    Recommendation,
)
from profiling.technique_kit.facts import Facts
from profiling.technique_kit.rule_kit import Outcome, interval_fields, judged, ms

ANCHOR = "#engine"


def _interval(
    ratio: float | None, bounds: tuple[float, float] | None, repeats: int
) -> Interval | None:
    if ratio is None or bounds is None:
        return None
    return Interval(ratio, bounds[0], bounds[1], repeats=repeats)


def _streamed(point: ServingPoint) -> int:
    return sum(point.streamed) if point.streamed else point.requests


def _faster(before_ms: float, after_ms: float) -> str:
    """ "decode 1.12× faster: TPOT 3.41 → 3.02 ms" """
    return (f"decode {before_ms / after_ms:.2f}× faster: "
            f"TPOT {ms(before_ms / 1e3)} → {ms(after_ms / 1e3)} ms")  # fmt: skip


def engine_outcomes(
    engine: EngineResult | None, facts: Facts, tolerance: QualityTolerance
) -> dict[str, list[Outcome]]:
    """Outcomes by technique name, for the techniques the engine measured."""
    if engine is None or point_at(engine, facts.workload.concurrency) is None:
        return {}
    out: dict[str, list[Outcome]] = {}
    if engine.prefix_caching is not None and engine.prefix_caching.shared_prefix_tokens:
        out["caching"] = _caching(engine, engine.prefix_caching)
    if engine.speculative:
        out["speculative"] = _speculative(engine, facts)
    if any(q.status != "not available" for q in engine.quantization):
        out["quantization"] = _quantization(engine, facts, tolerance)
    return out


def _caching(engine: EngineResult, result: PrefixCachingResult) -> list[Outcome]:
    key = "engine.prefix_caching"
    on = point_at(engine, result.concurrency)
    repeats = _streamed(on) if on else 0
    interval = _interval(result.speedup, result.interval, repeats)
    what = f"prefix caching on {engine.name} (TTFT p50 off / on)"
    if interval is None:
        return [NotRecommended("caching", f"{what}: no request streamed", key, inconclusive=True)]
    refused = judged("caching", what, interval, key)
    if refused is not None:
        return [refused]
    off, on_ms = result.ttft_ms.off.p50, result.ttft_ms.on.p50
    return [Recommendation(
        technique="caching",
        setting=f"keep {engine.name}'s automatic prefix caching on (its default)",
        expected_effect=ExpectedEffect(
            f"TTFT {off / on_ms:.1f}× shorter with it: {ms(off / 1e3)} → {ms(on_ms / 1e3)} ms at "
            f"concurrency {result.concurrency}, {result.hit_rate:.0%} of prompt tokens "
            "served from the cache (measured on the engine)",
            [Change("ttft_ms", off, on_ms, "ms")],
        ),
        evidence=[Evidence(ANCHOR, key, f"hit rate {result.hit_rate:.0%}")],
        caveats=["the report's figures are with caching on: this is what turning it off "
                 "would cost"],
        basis="measured", serves="prompt", gain=off / on_ms, already_on=True,
        **interval_fields(interval, f"over {repeats} requests"),
        **({"gain_bound": 1 / (1 - result.hit_rate),
            "bound_why": f"{1 - result.hit_rate:.0%} of prompt tokens still prefilled"}
           if result.hit_rate < 1 else {}),
    )]  # fmt: skip


def _speculative(engine: EngineResult, facts: Facts) -> list[Outcome]:
    c = facts.workload.concurrency
    base = point_at(engine, c)
    out: list[Outcome] = []
    candidates = []
    for i, p in enumerate(engine.speculative):
        key = f"engine.speculative[{i}]"
        name = f"{p.method} K={p.k} on {engine.name}"
        if p.status != "ran":
            out.append(NotRecommended("speculative", f"{name}: engine failed: {p.error}", key))
        elif not p.output_matches:
            out.append(
                NotRecommended(
                    "speculative", f"{name}: greedy output differed from the plain server's", key
                )
            )
        else:
            at = next((q for q in p.points if q.concurrency == c), None)
            interval = _interval(
                p.speedup_at_concurrency, p.interval_at_concurrency, _streamed(at) if at else 0
            )
            if interval is not None and at is not None:
                candidates.append((interval.low, i, p, at, interval))
    if not candidates or base is None:
        return out
    candidates.sort(key=lambda c: c[:2], reverse=True)
    _, i, p, at, interval = candidates[0]
    key = f"engine.speculative[{i}]"

    def what(point: Any) -> str:
        return (f"{point.method} K={point.k} on {engine.name} at concurrency {c} "
                "(TPOT p50 without / with)")  # fmt: skip

    # Every configuration but the best is set aside with its own figure.
    for _, j, other, _, other_interval in candidates[1:]:
        other_key = f"engine.speculative[{j}]"
        refused = judged("speculative", what(other), other_interval, other_key)
        out.append(refused or NotRecommended(
            "speculative", f"{what(other)}: {other_interval.text()}; {p.method} K={p.k} is "
            "surer", other_key))  # fmt: skip
    refused = judged("speculative", what(p), interval, key)
    if refused is not None:
        return [*out, refused]
    before, after = base.tpot_ms.p50, at.tpot_ms.p50
    return [*out, Recommendation(
        technique="speculative",
        setting=f"{engine.name} {shlex.join(p.flags)}",
        expected_effect=ExpectedEffect(
            f"{_faster(before, after)} at concurrency {c}, {p.mean_accepted_length:.2f} tokens "
            "per verify step (measured on the engine)",
            [Change("tpot_ms", before, after, "ms")],
        ),
        evidence=[Evidence(ANCHOR, key, f"acceptance {p.acceptance_rate:.0%}")],
        caveats=[f"at concurrency 1 it is {p.speedup:.2f}×{_of_server(p)}"] if p.speedup else [],
        basis="measured", serves="generation", gain=before / after,
        **interval_fields(interval, f"over {_streamed(at)} requests"),
        **({"gain_bound": p.mean_accepted_length,
            "bound_why": f"{p.mean_accepted_length:.2f} tokens per verify step"}
           if p.mean_accepted_length else {}),
    )]  # fmt: skip


def _of_server(point: Any) -> str:
    """Where a speedup is of the server's mean TPOT (`techniques.tpot_speedup`), said so."""
    return " (of the server's mean TPOT)" if point.speedup_basis == "server" else ""


def _quantization(engine: EngineResult, facts: Facts, tolerance: QualityTolerance) -> list[Outcome]:
    base = point_at(engine, facts.workload.concurrency)
    out: list[Outcome] = []
    for i, q in enumerate(engine.quantization):
        key = f"engine.quantization[{i}]"
        name = f"{q.method} on {engine.name}"
        if q.status == "not available":
            continue
        if q.status != "ran":
            out.append(NotRecommended("quantization", f"{name}: engine failed: {q.error}", key))
            continue
        if q.perplexity and q.reference_perplexity:
            rise = q.perplexity / q.reference_perplexity - 1
            if rise > tolerance.max_perplexity_increase:
                out.append(NotRecommended(
                    "quantization", f"{name}: perplexity +{rise:.1%}, above the "
                    f"+{tolerance.max_perplexity_increase:.0%} tolerated", key))  # fmt: skip
                continue
        at = q.points[0] if q.points else None
        interval = _interval(q.speedup, q.interval, _streamed(at) if at else 0)
        if interval is None or base is None or at is None:
            continue
        refused = judged("quantization", f"{name} (TPOT p50 without / with)", interval, key)
        if refused is not None:
            out.append(refused)
            continue
        before, after = base.tpot_ms.p50, at.tpot_ms.p50
        setting = f"{engine.name} {shlex.join(q.flags)}"
        if "--model" in q.flags:  # our checkpoint lived in the job's temporary folder
            rest = [f for f in q.flags if f not in q.flags[:4]]
            setting = (f"{engine.name} serve <your GPTQ int4 checkpoint, made as this job's "
                       f"quantization experiment made it> {shlex.join(rest)}").strip()  # fmt: skip
        out.append(Recommendation(
            technique="quantization",
            setting=setting,
            expected_effect=ExpectedEffect(
                f"{_faster(before, after)} (measured on the engine)",
                [Change("tpot_ms", before, after, "ms")],
            ),
            evidence=[Evidence(ANCHOR, key, f"perplexity {q.perplexity or 0:.3g}")],
            caveats=[q.note] if q.note else [],
            basis="measured", serves="generation", gain=before / after,
            **interval_fields(interval, f"over {_streamed(at)} requests"),
        ))  # fmt: skip
    return out


def recommended_flags(engine: EngineResult, recommendations: list[Recommendation]) -> list[str]:
    """The flags of every engine-measured recommendation, in the advice's order."""
    flags: list[str] = []
    backend = ENGINES.get(engine.name)
    for rec in recommendations:
        for evidence in rec.evidence:
            part, _, index = evidence.key.removeprefix("engine.").partition("[")
            if evidence.anchor != ANCHOR or part not in ("speculative", "quantization"):
                continue
            entries = engine.speculative if part == "speculative" else engine.quantization
            i = int(index.rstrip("]"))
            if (
                i >= len(entries)
                or backend is None
                or backend.names_another_checkpoint(entries[i].flags)
            ):
                continue  # another checkpoint (GPTQ): its recommendation names it
            if not any(f in flags for f in entries[i].flags[::2]):
                flags += entries[i].flags
    return flags
