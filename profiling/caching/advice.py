"""The prefix-caching rule: warm against cold TTFT at the user's shared prefix, and the
reuse in their own prompts."""

from __future__ import annotations

from profiling.caching.results import CachingResult, PrefixPoint
from profiling.measure.stats import Interval, ratio_interval
from profiling.projection.estimate import Deployment, Traffic, project
from profiling.technique_kit.advice_results import (
    ESTIMATED,
    MEASURED,
    Change,
    Evidence,
    ExpectedEffect,
    NotRecommended,
    QualityTolerance,
    Recommendation,
)
from profiling.technique_kit.facts import Facts
from profiling.technique_kit.rule_kit import (
    MIN_GAIN,
    Outcome,
    interval_fields,
    judged,
    ms,
    weak,
    your_users,
)
from profiling.units import size


def caching(
    facts: Facts, result: CachingResult | None, goal: str, tolerance: QualityTolerance
) -> list[Outcome]:
    if result is None:
        return caching_estimate(facts)
    sample, shared = result.prompt_sample, result.shared_prefix
    if sample is not None and sample.cold_ttft_seconds and sample.warm_ttft_seconds:
        point, key = sample.measured, "caching.prompt_sample"
        cold, warm = sample.cold_ttft_seconds, sample.warm_ttft_seconds
        setting = (f"prefix cache (automatic prefix caching): your prompts repeat "
                   f"{sample.reuse_fraction:.0%} of their tokens")  # fmt: skip
        memory = sample.cache_bytes_needed
    elif shared is not None:
        point, key = shared, "caching.shared_prefix"
        cold, warm = shared.cold_ttft_seconds.median, shared.warm_ttft_seconds.median
        setting = (
            f"prefix cache for the shared {facts.workload.shared_prefix_tokens}-token system prompt"
        )
        memory = shared.prefix_cache_bytes
    else:
        why = "no repeated prompt work known: no shared prefix in the workload, no prompt sample"
        return [NotRecommended("caching", why, "caching.prefix_sweep")]
    if point is not None and not point.outputs_match:
        why = "outputs with a reused cache differed from cold outputs (a failed check)"
        return [NotRecommended("caching", why, key)]
    gain = cold / warm if warm else 0.0
    interval = cold_to_warm(point) if point is not None else None
    if interval is None:
        if gain < MIN_GAIN:
            return [weak("caching", gain, "TTFT cold / warm", key)]
    elif (refused := judged("caching", "TTFT cold / warm", interval, key)) is not None:
        return [refused]
    return [_cache_recommendation(facts, result, setting, key, cold, warm, memory, interval)]


def cold_to_warm(point: PrefixPoint) -> Interval | None:
    """Cold / warm TTFT: the ratio of the medians and its interval from the
    interleaved cold and warm repeats (resampled in pairs)."""
    return ratio_interval(
        point.cold_ttft_seconds.samples, point.warm_ttft_seconds.samples, paired=True
    )


def _cache_recommendation(
    facts: Facts, result: CachingResult, setting: str, key: str,
    cold: float, warm: float, memory: int | None, interval: Interval | None,
) -> Recommendation:  # fmt: skip
    ttft = facts.ttft_seconds
    after = ttft * warm / cold
    figure = f"TTFT {ms(cold)} ms cold, {ms(warm)} ms warm at {result.prompt_tokens}-token prompts"
    caveats = [
        "helps only when requests sharing a prefix reach the same server (cache-aware routing)"
    ]
    if memory:
        caveats.append(f"the cached prefixes hold {size(memory)} of KV cache")
    if result.prompt_tokens != facts.workload.prompt_tokens:
        caveats.append(f"measured at {result.prompt_tokens}-token prompts, scaled to yours")
    return Recommendation(
        technique="caching",
        setting=setting,
        expected_effect=ExpectedEffect(
            f"TTFT {cold / warm:.1f}× shorter: {ms(ttft)} → {ms(after)} ms",
            [
                Change("ttft_ms", ttft * 1e3, after * 1e3, "ms"),
                Change("measured_ttft_ms", cold * 1e3, warm * 1e3, "ms"),
            ],
        ),  # fmt: skip
        evidence=[Evidence("#caching", key, figure)],
        caveats=caveats,
        basis=MEASURED,
        serves="prompt",
        gain=cold / warm,
        **(interval_fields(interval) if interval is not None else {}),
        **_bound(result, key),
    )


def _bound(result: CachingResult, key: str) -> dict[str, object]:
    """A warm prefill still computes the uncached part (attending to the prefix, which only
    adds): its TTFT is at least that part's share of the cold one."""
    point = result.shared_prefix if key == "caching.shared_prefix" else None
    if point is None or point.prefix_tokens >= point.prompt_tokens:
        return {}
    fresh = point.prompt_tokens - point.prefix_tokens
    return {"gain_bound": point.prompt_tokens / fresh,
            "bound_why": f"a warm prompt still prefills its {fresh} uncached tokens of "
                         f"{point.prompt_tokens}"}  # fmt: skip


# -- where the experiment did not run: an estimate -------------------------------


def caching_estimate(facts: Facts) -> list[Outcome]:
    """The workload served by the simulated engine with and without the shared prefix in
    the prefix cache (each request then prefills only the rest, attending to the prefix,
    and the prefix's KV is held once): the TTFT ratio, applied to the page's TTFT."""
    w = facts.workload
    prefix = w.shared_prefix_tokens
    shapes, calibration = facts.shapes, facts.calibration
    if not prefix or shapes is None or calibration is None:
        return []

    def ttft(cached: int) -> float:
        traffic = Traffic(w.prompt_tokens, w.output_tokens, w.concurrency, w.ttft_ms,
                          w.tpot_ms, cached_tokens=cached)  # fmt: skip
        deployment = Deployment(facts.gpu, facts.gpu_count, engine=facts.engine_limits())
        return project(shapes, calibration, facts.dtype, traffic, deployment).ttft_seconds

    ratio = ttft(0) / ttft(prefix)
    if ratio < MIN_GAIN:
        why = (f"the prefill of {prefix} cached tokens is a small part of TTFT at "
               f"{your_users(w.concurrency)}: {ratio:.2f}× (estimated)")  # fmt: skip
        return [NotRecommended("caching", why, "config.workload.shared_prefix_tokens")]
    before = facts.ttft_seconds
    after = before / ratio
    return [Recommendation(
        technique="caching",
        setting=f"prefix cache for the shared {prefix}-token system prompt",
        expected_effect=ExpectedEffect(
            f"TTFT {ratio:.1f}× shorter: {ms(before)} → {ms(after)} ms at "
            f"{your_users(w.concurrency)}",
            [Change("ttft_ms", before * 1e3, after * 1e3, "ms")]),
        evidence=[Evidence("#verdict", f"{facts.timing_key}.ttft",
                           f"TTFT {ms(before)} ms at {w.prompt_tokens} prompt tokens, "
                           f"{prefix} shared")],
        caveats=["estimated: the caching experiment did not run; the workload served with "
                 "and without the prefix cached, each request prefilling the rest of its "
                 "prompt",
                 f"the cached prefix holds {size(facts.kv_bytes_per_token * prefix)} of KV cache "
                 "once for every request"],
        basis=ESTIMATED,
        serves="prompt",
        gain=ratio,
    )]  # fmt: skip
