"""The quantization finding in one measured line, and the run's warnings."""

from __future__ import annotations

from profiling.measure.timing import noisy_warnings
from profiling.quantization.results import MEASURED, QuantizationResult, QuantVariant

SAME = 0.05  # ratios within ±5 % are reported as about the same


def variant_line(variant: QuantVariant, reference: QuantVariant) -> str:
    parts = []
    if variant.weights_bytes and reference.weights_bytes:
        ratio = reference.weights_bytes / variant.weights_bytes
        parts.append(f"weights {_ratio_text(ratio, 'smaller', 'larger')}")
    if variant.seconds_per_token and reference.seconds_per_token:
        ratio = reference.seconds_per_token.median / variant.seconds_per_token.median
        parts.append(f"decode {_ratio_text(ratio, 'faster', 'slower')}")
    if variant.perplexity is not None and reference.perplexity:
        change = (variant.perplexity / reference.perplexity - 1) * 100
        parts.append(f"perplexity {change:+.1f} %" if abs(change) >= 0.05 else "perplexity ±0.0 %")
    if variant.top1_agreement is not None:
        parts.append(f"top-1 agreement {variant.top1_agreement:.0%}")
    return f"{variant.name}: " + ", ".join(parts)


def _ratio_text(ratio: float, better: str, worse: str) -> str:
    if abs(ratio - 1) <= SAME:
        return "about the same"
    return f"{ratio:.1f}× {better}" if ratio > 1 else f"{1 / ratio:.1f}× {worse}"


def finding(result: QuantizationResult) -> str:
    """One line: each measured variant against the reference, measured in this run."""
    reference = result.reference_variant
    if reference is None or reference.status != MEASURED:
        return "the reference precision could not be measured, so nothing is compared"
    # The one-part variants are in the table; the line compares the default ones.
    others = [v for v in _measured(result) if not v.is_reference and not _is_extra_variant(v)]
    if not others:
        return f"only the reference ({reference.name}) could be measured on this worker"
    return f"against {reference.name}: " + "; ".join(variant_line(v, reference) for v in others)


def warnings_for(result: QuantizationResult, device: str) -> list[str]:
    out = []
    if result.config_only:
        out.append(
            "config-only model: random weights, so only memory and speed are measured; "
            "perplexity and agreement would be meaningless"
        )
    labelled = [
        (f"{v.name} {label}", samples)
        for v in result.variants
        for label, samples in (("TTFT", v.ttft_seconds), ("decode", v.seconds_per_token))
        if samples is not None
    ]
    out += noisy_warnings(labelled)
    if device == "cpu" and any(v.settings and v.settings.bits < 16 for v in _measured(result)):
        out.append(
            "measured on CPU: quantized kernels here are often slower than plain float "
            "matrix multiplies, so decode speed on a GPU can differ in direction, not just size"
        )
    return out


def _is_extra_variant(variant: QuantVariant) -> bool:
    return variant.name != variant.precision  # "int8 · lm_head quantized"


def _measured(result: QuantizationResult) -> list[QuantVariant]:
    return [v for v in result.variants if v.status == MEASURED]
