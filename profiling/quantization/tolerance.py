"""When a quantized variant changed the model too much to be advised.

A variant is refused when its teacher-forced top-1 agreement with the
reference falls below MIN_TOP1_AGREEMENT or its perplexity on the evaluation
text rises by more than MAX_PERPLEXITY_INCREASE (both measured by the
quantization experiment; see `profiling.quantization.results.QUALITY_CONVENTION`).
"""

from __future__ import annotations

from profiling.quantization.results import MEASURED, QuantizationResult, QuantVariant
from profiling.technique_kit.advice_results import QualityTolerance

MIN_TOP1_AGREEMENT = 0.95
MAX_PERPLEXITY_INCREASE = 0.05
DEFAULT_TOLERANCE = QualityTolerance(MIN_TOP1_AGREEMENT, MAX_PERPLEXITY_INCREASE)


def quality_figure(variant: QuantVariant, reference: QuantVariant) -> str:
    """ "top-1 agreement 99 %, perplexity +0.4 %" (or why quality is unknown)."""
    parts = []
    if variant.top1_agreement is not None:
        parts.append(f"top-1 agreement {variant.top1_agreement:.0%}")
    change = perplexity_change(variant, reference)
    if change is not None:
        parts.append(f"perplexity {change * 100:+.1f} %")
    return ", ".join(parts) or "quality not measured"


def perplexity_change(variant: QuantVariant, reference: QuantVariant) -> float | None:
    if variant.perplexity is None or not reference.perplexity:
        return None
    return variant.perplexity / reference.perplexity - 1


def quality_loss(
    variant: QuantVariant, reference: QuantVariant, tolerance: QualityTolerance
) -> str | None:
    """Why the variant's measured quality is outside the tolerance, or None when it is not."""
    reasons = []
    agreement = variant.top1_agreement
    if agreement is not None and agreement < tolerance.min_top1_agreement:
        reasons.append(
            f"top-1 agreement {agreement:.1%} is below {tolerance.min_top1_agreement:.0%}"
        )
    change = perplexity_change(variant, reference)
    if change is not None and change > tolerance.max_perplexity_increase:
        reasons.append(
            f"perplexity rose {change:+.1%}, more than {tolerance.max_perplexity_increase:+.0%}"
        )
    return "; ".join(reasons) or None


def acceptable(result: QuantizationResult, tolerance: QualityTolerance) -> list[int]:
    """Indices of the measured non-reference variants within the tolerance."""
    reference = result.reference_variant
    if reference is None or reference.status != MEASURED:
        return []
    return [
        i
        for i, v in enumerate(result.variants)
        if not v.is_reference
        and v.status == MEASURED
        and v.weights_bytes
        and quality_loss(v, reference, tolerance) is None
    ]
