"""The rules: one small function per technique, each from what its experiment measured.

A rule returns recommendations and refusals (`NotRecommended`, each with
the measured reason). Refused always: a variant or run whose measurement
failed; speculative decoding whose measured speedup at the batch nearest the
user's concurrency is below 1; a quantized variant outside the quality
tolerance (`profiling.advice.quality`). Where an experiment did not run,
`profiling.advice.fallback` stands in with an estimate marked "estimated".

Ranking (`rank`): recommendations acting on the bottleneck come first, then
the larger expected gain: the factor by which the figure the technique acts
on improves (TPOT for generation, TTFT for prompt work, requests that fit for
memory); making a workload fit at all counts as MAKES_IT_FIT. A gain under
MIN_GAIN is refused as "about the same".
"""

from __future__ import annotations

from typing import Any

from profiling.advice import fallback
from profiling.advice.facts import Facts
from profiling.advice.fallback import MAKES_IT_FIT
from profiling.advice.quality import acceptable, quality_figure, quality_loss
from profiling.advice.results import (
    ESTIMATED,
    MEASURED,
    Change,
    Evidence,
    ExpectedEffect,
    NotRecommended,
    QualityTolerance,
    Recommendation,
)
from profiling.advice.text import gb, ms
from profiling.caching.results import CachingResult
from profiling.config import PRECISIONS
from profiling.parallel.results import BASIS_MEASURED, DisaggregationResult, ParallelResult
from profiling.quantization.report import variant_line
from profiling.quantization.results import MEASURED as QUANT_MEASURED
from profiling.quantization.results import QuantizationResult, QuantVariant
from profiling.speculative.results import PROMPT_LOOKUP, SpeculativeResult, SweepPoint
from profiling.verdict import nearest_batch

MIN_GAIN = 1.05
DISAGGREGATION_MIN_SPIKE = 1.5  # a prefill joining a decode step slows it this much or more
Outcome = Recommendation | NotRecommended


def rank(recommendations: list[Recommendation], bottleneck: str) -> list[Recommendation]:
    return sorted(recommendations, key=lambda r: (r.serves != bottleneck, -r.gain))


def _weak(technique: str, gain: float, what: str, key: str) -> NotRecommended:
    return NotRecommended(technique, f"{what}: {gain:.2f}×, about the same", key)


# -- quantization ---------------------------------------------------------------


def quantization(facts: Facts, goal: str, tolerance: QualityTolerance) -> list[Outcome]:
    data = facts.experiments.get("quantization")
    if not data:
        return fallback.quantization(facts, goal)
    result = QuantizationResult.from_dict(data)
    reference = result.reference_variant
    if reference is None or reference.status != QUANT_MEASURED:
        why = "the reference precision could not be measured, so no variant can be judged"
        return [NotRecommended("quantization", why, "quantization.variants")]
    out: list[Outcome] = _refused_variants(result, reference, tolerance)
    serves = "memory" if goal in ("memory", "devices") else "generation"
    scored = [(i, _quant_gain(facts, result.variants[i], reference, serves))
              for i in acceptable(result, tolerance)]  # fmt: skip
    if not scored:
        return out
    best, gain = max(scored, key=lambda s: (s[1], -(result.variants[s[0]].weights_bytes or 0)))
    key = f"quantization.variants[{best}]"
    if gain < MIN_GAIN:
        what = "decode speed" if serves == "generation" else "requests that fit"
        return [*out, _weak("quantization", gain, f"{result.variants[best].name}: {what}", key)]
    variant = result.variants[best]
    rec = Recommendation(
        technique="quantization",
        setting=quant_setting(variant, reference),
        expected_effect=_quant_effect(facts, variant, reference),
        evidence=[Evidence("#quantization", key, variant_line(variant, reference))],
        caveats=_quant_caveats(facts, result, variant, reference),
        basis=MEASURED,
        serves=serves,
        gain=gain,
    )
    return [rec, *out]


def _refused_variants(
    result: QuantizationResult, reference: QuantVariant, tolerance: QualityTolerance
) -> list[Outcome]:
    out: list[Outcome] = []
    for i, v in enumerate(result.variants):
        key = f"quantization.variants[{i}]"
        if v.is_reference:
            continue
        if v.status != QUANT_MEASURED:
            why = f"{v.name}: measurement {v.status.replace('_', ' ')}: {v.reason or 'no reason'}"
            out.append(NotRecommended("quantization", why, key))
        elif loss := quality_loss(v, reference, tolerance):
            out.append(NotRecommended("quantization", f"{v.name}: {loss}", key))
    return out


def quant_setting(variant: QuantVariant, reference: QuantVariant) -> str:
    text = PRECISIONS.get(variant.precision, variant.precision)
    kept = variant.settings.kept_modules if variant.settings else []
    if kept:
        dtype = reference.settings.weight_dtype if reference.settings else "the reference dtype"
        text += f", keep {', '.join(kept)} in {dtype}"
    return text


def _speed_ratio(variant: QuantVariant, reference: QuantVariant) -> float | None:
    """Reference step time / variant step time, at the concurrency where measured."""
    for attr in ("concurrency_seconds_per_token", "seconds_per_token"):
        ref, var = getattr(reference, attr), getattr(variant, attr)
        if ref is not None and var is not None and var.median:
            return ref.median / var.median
    return None


def _quant_gain(facts: Facts, variant: QuantVariant, reference: QuantVariant, serves: str) -> float:
    if serves == "generation":
        return _speed_ratio(variant, reference) or 0.0
    after = _scaled_weights(facts, variant, reference)
    return fallback.capacity_gain(facts, after)


def _scaled_weights(facts: Facts, variant: QuantVariant, reference: QuantVariant) -> int:
    """The profile's weights scaled by the variant's measured ratio to its reference."""
    return int(facts.weights_bytes * (variant.weights_bytes or 0) / (reference.weights_bytes or 1))


def _quant_effect(facts: Facts, variant: QuantVariant, reference: QuantVariant) -> ExpectedEffect:
    after = _scaled_weights(facts, variant, reference)
    changes = [Change("weights_bytes", facts.weights_bytes, after, "bytes")]
    text = (
        f"weights {facts.weights_bytes / after:.1f}× smaller "
        f"({gb(facts.weights_bytes)} → {gb(after)})"
    )
    ratio = _speed_ratio(variant, reference)
    if ratio:
        tpot = facts.tpot_seconds
        changes.append(Change("tpot_ms", tpot * 1e3, tpot / ratio * 1e3, "ms"))
        text += f"; decode {ratio:.2f}× the speed: TPOT {ms(tpot)} → {ms(tpot / ratio)} ms"
    changes += fallback.capacity_changes(facts, after)
    return ExpectedEffect(text, changes)


def _quant_caveats(
    facts: Facts, result: QuantizationResult, variant: QuantVariant, reference: QuantVariant
) -> list[str]:
    out = []
    if result.quality_meaningful:
        out.append(
            f"measured quality against {reference.name}: {quality_figure(variant, reference)}"
        )
    else:
        out.append("quality not measured (random weights): check it on the real model")
    ratio = _speed_ratio(variant, reference)
    if ratio is not None and ratio < 1:
        out.append(f"decode was {1 / ratio:.1f}× slower here with this variant")
    if facts.device == "cpu" and variant.settings and variant.settings.bits < 16:
        out.append("measured on CPU: quantized kernels on a GPU can differ in speed")
    if variant.concurrency != facts.workload.concurrency:
        out.append(f"speed measured at batch {variant.concurrency}, not your concurrency "
                   f"{facts.workload.concurrency}")  # fmt: skip
    return out


# -- speculative ----------------------------------------------------------------


def speculative(facts: Facts, goal: str, tolerance: QualityTolerance) -> list[Outcome]:
    data = facts.experiments.get("speculative")
    if not data:
        return []
    result = SpeculativeResult.from_dict(data)
    if not result.sweeps:
        why = "random weights or no sweep: acceptance unknown; " + (result.finding or "")
        return [NotRecommended("speculative", why.rstrip("; "), "speculative.verify_cost")]
    batch = nearest_batch(sorted({p.batch_size for p in result.sweeps}), facts.workload.concurrency)
    points = [(i, p) for i, p in enumerate(result.sweeps) if p.batch_size == batch]
    broken = [(i, p) for i, p in points if not p.matches_baseline]
    if broken:
        i, p = broken[0]
        why = f"{p.draft} K={p.k}: output differed from plain greedy decoding (a failed run)"
        return [NotRecommended("speculative", why, f"speculative.sweeps[{i}]")]
    i, best = max(points, key=lambda ip: ip[1].speedup)
    key = f"speculative.sweeps[{i}]"
    at = f"at batch {batch} (measured batch nearest your concurrency {facts.workload.concurrency})"
    if best.speedup < 1:
        why = f"measured speedup {best.speedup:.2f}× {at}, best K={best.k}: slower than without"
        return [NotRecommended("speculative", why, key)]
    if best.speedup < MIN_GAIN:
        return [_weak("speculative", best.speedup, f"best speedup {at}", key)]
    return [_spec_recommendation(facts, result, best, key)]


def _spec_recommendation(
    facts: Facts, result: SpeculativeResult, best: SweepPoint, key: str
) -> Recommendation:
    name = (
        "prompt lookup (n-gram, no draft model)"
        if best.draft == PROMPT_LOOKUP
        else f"draft {best.draft}"
    )
    tpot = facts.tpot_seconds
    after = tpot / best.speedup
    figure = (f"{best.speedup:.2f}× faster at batch {best.batch_size}, "
              f"{best.mean_accepted_length:.2f} tokens per target pass, acceptance "
              f"{best.acceptance_rate:.0%}")  # fmt: skip
    return Recommendation(
        technique="speculative",
        setting=f"{name} with K={best.k}",
        expected_effect=ExpectedEffect(
            f"decode {best.speedup:.2f}× faster: TPOT {ms(tpot)} → {ms(after)} ms",
            [
                Change("tpot_ms", tpot * 1e3, after * 1e3, "ms"),
                Change(
                    "decode_tokens_per_second",
                    best.baseline_tokens_per_second,
                    best.tokens_per_second,
                    "tokens/s",
                ),
            ],
        ),  # fmt: skip
        evidence=[Evidence("#speculative", key, figure)],
        caveats=_spec_caveats(facts, result, best),
        basis=MEASURED,
        serves="generation",
        gain=best.speedup,
    )


def _spec_caveats(facts: Facts, result: SpeculativeResult, best: SweepPoint) -> list[str]:
    out = ["acceptance was measured on the fixed prompt set; your prompts may accept more or less"]
    draft = next((d for d in result.draft_memory if d.name == best.draft), None)
    if draft and draft.weights_bytes:
        kv = (
            draft.kv_cache_bytes_per_token
            * facts.workload.concurrency
            * facts.workload.context_tokens
        )
        out.append(f"extra memory: draft weights {gb(draft.weights_bytes)} + its KV cache {gb(kv)}")
    if best.batch_size != facts.workload.concurrency:
        out.append(f"measured at batch {best.batch_size}; the gain usually shrinks as batches grow")
    return out


# -- caching --------------------------------------------------------------------


def caching(facts: Facts, goal: str, tolerance: QualityTolerance) -> list[Outcome]:
    data = facts.experiments.get("caching")
    if not data:
        return fallback.caching(facts)
    result = CachingResult.from_dict(data)
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
    if gain < MIN_GAIN:
        return [_weak("caching", gain, "TTFT cold / warm", key)]
    return [_cache_recommendation(facts, result, setting, key, cold, warm, memory)]


def _cache_recommendation(
    facts: Facts, result: CachingResult, setting: str, key: str,
    cold: float, warm: float, memory: int | None,
) -> Recommendation:  # fmt: skip
    ttft = facts.ttft_seconds
    after = ttft * warm / cold
    figure = f"TTFT {ms(cold)} ms cold, {ms(warm)} ms warm at {result.prompt_tokens}-token prompts"
    caveats = [
        "helps only when requests sharing a prefix reach the same server (cache-aware routing)"
    ]
    if memory:
        caveats.append(f"the cached prefixes hold {gb(memory)} of KV cache")
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
    )


# -- parallel -------------------------------------------------------------------


def parallel(facts: Facts, goal: str, tolerance: QualityTolerance) -> list[Outcome]:
    data = facts.experiments.get("parallel")
    if not data:
        return fallback.parallel(facts, goal)
    result = ParallelResult.from_dict(data)
    measured = result.measured
    if measured.status == "failed":
        why = f"the tensor-parallel run failed: {measured.reason}"
        return [NotRecommended("parallel", why, "parallel.measured")]
    if measured.status == "measured" and measured.logits_match is False:
        why = "split over processes the model's logits differed from one process (a failed check)"
        return [NotRecommended("parallel", why, "parallel.measured")]
    if not fallback.needs_more_devices(facts, goal):
        return [fallback.parallel_not_needed(facts)]
    plan = result.fewest_devices
    if plan is None:
        why = "no tensor × pipeline split of up to 8 devices fits weights and KV cache"
        return [NotRecommended("parallel", why, "parallel.plans")]
    index = result.plans.index(plan)
    gpu = facts.gpu.label if facts.gpu else "devices"
    pp = f" × PP={plan.pp}" if plan.pp > 1 else ""
    changes = [Change("devices", facts.gpu_count, plan.devices, "GPUs"),
               Change("bytes_per_device", facts.fit.required_bytes / facts.gpu_count
                      if facts.fit else 0.0, plan.bytes_per_device, "bytes")]  # fmt: skip
    if measured.decode_ratio:
        tpot = facts.tpot_seconds
        changes.append(Change("tpot_ms", tpot * 1e3, tpot * measured.decode_ratio * 1e3, "ms"))
    usable = gb(plan.available_bytes_per_device or 0)
    figure = f"{gb(plan.bytes_per_device)} per device against {usable} usable"
    return [Recommendation(
        technique="parallel",
        setting=f"TP={plan.tp}{pp} on {plan.devices}× {gpu}",
        expected_effect=ExpectedEffect(f"fits: {figure}", changes),
        evidence=[Evidence("#parallel", f"parallel.plans[{index}]", figure)],
        caveats=[f"{plan.devices}× the GPUs; communication between them is not counted",
                 *([plan.note] if plan.note else [])],
        basis=MEASURED if result.basis == BASIS_MEASURED else ESTIMATED,
        serves="devices",
        gain=MAKES_IT_FIT,
    )]  # fmt: skip


# -- disaggregation -------------------------------------------------------------


def disaggregation(facts: Facts, goal: str, tolerance: QualityTolerance) -> list[Outcome]:
    data = facts.experiments.get("disaggregation")
    if not data:
        return fallback.disaggregation(facts)
    d = DisaggregationResult.from_dict(data)
    key = "disaggregation"
    if facts.workload.concurrency == 1:
        why = "one request at a time: no prefill ever joins another request's decode"
        return [NotRecommended("disaggregation", why, key)]
    if d.tpot_spike < DISAGGREGATION_MIN_SPIKE:
        why = (f"a prefill joining a decode step slows it only {d.tpot_spike:.2f}× "
               f"(threshold {DISAGGREGATION_MIN_SPIKE}×)")  # fmt: skip
        return [NotRecommended("disaggregation", why, key + ".tpot_spike")]
    return [disaggregation_recommendation(d, MEASURED)]


def disaggregation_recommendation(d: DisaggregationResult, basis: str) -> Recommendation:
    fixes_target = d.alone_meets_tpot and d.mixed_meets_tpot is False
    gain = d.tpot_spike if fixes_target else d.mean_tpot_seconds / d.decode_alone_tpot_seconds
    changes = [
        Change(
            "worst_tpot_ms",
            d.decode_mixed_tpot_seconds * 1e3,
            d.decode_alone_tpot_seconds * 1e3,
            "ms",
        ),
        Change("mean_tpot_ms", d.mean_tpot_seconds * 1e3, d.decode_alone_tpot_seconds * 1e3, "ms"),
    ]
    if d.ttft_disaggregated_seconds is not None:
        changes.append(Change("ttft_ms", d.prefill_seconds_per_request * 1e3,
                              d.ttft_disaggregated_seconds * 1e3, "ms"))  # fmt: skip
    caveats = [f"runs {d.prefill_workers + d.decode_workers} workers ({d.workers}) for your rate "
               f"of {d.request_rate_per_second:.2f} requests/s: more to operate"]  # fmt: skip
    if d.kv_transfer_seconds is not None:
        caveats.append(f"each request's KV cache ({gb(d.kv_transfer_bytes_per_request)}) crosses "
                       f"{d.link}: +{ms(d.kv_transfer_seconds)} ms TTFT")  # fmt: skip
    return Recommendation(
        technique="disaggregation",
        setting=f"disaggregate with {d.workers}",
        expected_effect=ExpectedEffect(
            f"no prefill stalls decode: worst TPOT {ms(d.decode_mixed_tpot_seconds)} → "
            f"{ms(d.decode_alone_tpot_seconds)} ms",
            changes,
        ),  # fmt: skip
        evidence=[
            Evidence(
                "#disaggregation",
                "disaggregation.tpot_spike",
                f"a prefill joining a decode step makes it {d.tpot_spike:.2f}× slower",
            )
        ],
        caveats=caveats,
        basis=basis,
        serves="generation",
        gain=gain,
    )


RULES: dict[str, Any] = {
    "quantization": quantization,
    "speculative": speculative,
    "caching": caching,
    "parallel": parallel,
    "disaggregation": disaggregation,
}
