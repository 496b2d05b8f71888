"""The quantization rule: each measured precision against the reference, within the
quality tolerance."""

from __future__ import annotations

from typing import Any

from profiling.config import PRECISIONS
from profiling.measure.stats import Interval, ratio_interval
from profiling.model.shapes import DTYPE_BYTES
from profiling.quantization.estimate_advice import precision_estimate
from profiling.quantization.report import variant_line
from profiling.quantization.results import MEASURED as QUANT_MEASURED
from profiling.quantization.results import QuantizationResult, QuantVariant
from profiling.quantization.tolerance import acceptable, quality_figure, quality_loss
from profiling.results import Samples
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
    capacity_changes,
    capacity_gain,
    decode_seconds_with_weights,
    interval_fields,
    judged,
    ms,
    weak,
)
from profiling.units import size


def quantization(
    facts: Facts, result: QuantizationResult | None, goal: str, tolerance: QualityTolerance
) -> list[Outcome]:
    if result is None:
        return quantization_estimate(facts, goal)
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
    variant = result.variants[best]
    interval = speed_interval(variant, reference)
    if serves == "generation" and interval is not None:
        # The interval tells a loss, the same speed and the noise apart.
        refused = judged("quantization", f"{variant.name}: decode speed", interval, key)
        if refused is not None:
            return [*out, refused]
    if gain < MIN_GAIN:
        what = "decode speed" if serves == "generation" else "requests that fit"
        return [*out, weak("quantization", gain, f"{variant.name}: {what}", key)]
    rec = Recommendation(
        technique="quantization",
        setting=quant_setting(variant, reference),
        expected_effect=_quant_effect(facts, variant, reference),
        evidence=[Evidence("#quantization", key, variant_line(variant, reference))],
        caveats=_quant_caveats(facts, result, variant, reference),
        basis=MEASURED,
        serves=serves,
        gain=gain,
        **_confidence(serves, interval),
        **_bound(variant, reference, serves),
        measured_at_batch=_speed_batch(variant, reference) if serves == "generation" else None,
    )
    return [rec, *out]


def _confidence(serves: str, interval: Interval | None) -> dict[str, Any]:
    if serves != "generation":
        return {"confidence": "measured: weight bytes are exact; quality from the quality check"}
    if interval is None:
        return {}
    return interval_fields(interval)


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


def _step_times(
    variant: QuantVariant, reference: QuantVariant
) -> tuple[Samples, Samples, int] | None:
    """(reference, variant) decode step times and the batch they were timed at: the
    concurrency where both were measured (the user's), else batch 1."""
    for attr, batch in (("concurrency_seconds_per_token", variant.concurrency),
                        ("seconds_per_token", 1)):  # fmt: skip
        ref, var = getattr(reference, attr), getattr(variant, attr)
        if ref is not None and var is not None and var.median:
            return ref, var, batch
    return None


def _speed_batch(variant: QuantVariant, reference: QuantVariant) -> int | None:
    times = _step_times(variant, reference)
    return times[2] if times else None


def _bound(variant: QuantVariant, reference: QuantVariant, serves: str) -> dict[str, Any]:
    """A faster decode from smaller weights is bounded by the bytes they save: a step reads
    the weights once, so it speeds up at most by the ratio of the weights' bytes."""
    if serves != "generation" or not variant.weights_bytes or not reference.weights_bytes:
        return {}
    ratio = reference.weights_bytes / variant.weights_bytes
    return {"gain_bound": ratio,
            "bound_why": f"its weights are {ratio:.2f}× smaller, and a decode step reads them "
                         "once beside a KV cache that does not shrink"}  # fmt: skip


def speed_interval(variant: QuantVariant, reference: QuantVariant) -> Interval | None:
    """Reference step time / variant step time with its interval (for the variant judged)."""
    times = _step_times(variant, reference)
    return ratio_interval(times[0].samples, times[1].samples) if times else None


def _speed_ratio(variant: QuantVariant, reference: QuantVariant) -> float | None:
    """The same ratio of medians without its interval (for ranking and the text)."""
    times = _step_times(variant, reference)
    return times[0].median / times[1].median if times else None


def _quant_gain(facts: Facts, variant: QuantVariant, reference: QuantVariant, serves: str) -> float:
    if serves == "generation":
        return _speed_ratio(variant, reference) or 0.0
    after = _scaled_weights(facts, variant, reference)
    return capacity_gain(facts, after)


def _scaled_weights(facts: Facts, variant: QuantVariant, reference: QuantVariant) -> int:
    """The profile's weights scaled by the variant's measured ratio to its reference."""
    return int(facts.weights_bytes * (variant.weights_bytes or 0) / (reference.weights_bytes or 1))


def _quant_effect(facts: Facts, variant: QuantVariant, reference: QuantVariant) -> ExpectedEffect:
    after = _scaled_weights(facts, variant, reference)
    changes = [Change("weights_bytes", facts.weights_bytes, after, "bytes")]
    text = (
        f"weights {facts.weights_bytes / after:.1f}× smaller "
        f"({size(facts.weights_bytes)} → {size(after)})"
    )
    ratio = _speed_ratio(variant, reference)
    if ratio:
        tpot = facts.tpot_seconds
        changes.append(Change("tpot_ms", tpot * 1e3, tpot / ratio * 1e3, "ms"))
        text += f"; decode {ratio:.2f}× the speed: TPOT {ms(tpot)} → {ms(tpot / ratio)} ms"
    changes += capacity_changes(facts, after)
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
    batch = _speed_batch(variant, reference)
    if batch is not None and batch != facts.workload.concurrency:
        out.append(f"speed measured at batch {batch}, not your concurrency "
                   f"{facts.workload.concurrency}")  # fmt: skip
    return out


# -- where the experiment did not run: an estimate -------------------------------


def quantization_estimate(facts: Facts, goal: str) -> list[Outcome]:
    by_format = precision_estimate(facts, goal)
    if by_format is not None:
        return by_format
    per_param = DTYPE_BYTES.get(facts.dtype, 2)
    if per_param <= 1:
        return []
    after = int8_weights_bytes(facts, per_param)
    tpot_after = decode_seconds_with_weights(facts, after)
    serves = "memory" if goal in ("memory", "devices") else "generation"
    gain = capacity_gain(facts, after) if serves == "memory" else facts.tpot_seconds / tpot_after
    if gain < 1.05:
        why = f"int8 weights ({size(after)}) would not change what the goal needs (estimated)"
        return [NotRecommended("quantization", why, "memory.weights_bytes")]
    tpot = facts.tpot_seconds
    changes = [Change("weights_bytes", facts.weights_bytes, after, "bytes"),
               Change("tpot_ms", tpot * 1e3, tpot_after * 1e3, "ms")]  # fmt: skip
    changes += capacity_changes(facts, after)
    text = (f"weights {size(facts.weights_bytes)} → {size(after)}; TPOT {ms(tpot)} → "
            f"{ms(tpot_after)} ms (fewer bytes read per decode step)")  # fmt: skip
    return [Recommendation(
        technique="quantization",
        setting=f"int8 weight-only, keep lm_head and embeddings in {facts.dtype}",
        expected_effect=ExpectedEffect(text, changes),
        evidence=[Evidence("#memory", "memory.weights_bytes",
                           f"weights {size(facts.weights_bytes)} in {facts.dtype}")],
        caveats=["estimated: the quantization experiment did not run, so quality was not "
                 "measured; run it to see top-1 agreement and perplexity on your model",
                 "assumes kernels that read int8 weights directly (e.g. torchao on a GPU)"],
        basis=ESTIMATED,
        serves=serves,
        gain=gain,
    )]  # fmt: skip


def int8_weights_bytes(facts: Facts, per_param: float) -> int:
    """The weights with the decoder's at one byte each and the LM head and embeddings left
    in the model's dtype (the default quantized variant); without the model's shapes,
    every weight at one byte."""
    shapes = facts.shapes
    if shapes is None:
        return int(facts.weights_bytes / per_param)
    return int(shapes.body_params + shapes.edge_params * per_param)
