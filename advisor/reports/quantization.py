"""The quantization section: each variant against the reference, how it was made,
and its greedy outputs beside the reference's.

Built from the typed `QuantizationResult` of the profile. Token text
and reasons stay plain strings here; the template's autoescape is what makes
them safe. Numbers are formatted with the report's unit filters, each next to
its ratio to the reference ("3.6× smaller", "1.4× slower").
"""

from __future__ import annotations

import math
from typing import Any

from advisor.reports.speculative import visible
from profiling.quantization.results import (
    DOES_NOT_FIT,
    FAILED,
    MEASURED,
    NOT_AVAILABLE,
    QuantizationResult,
    QuantVariant,
)
from profiling.results import Samples
from profiling.units import UNKNOWN, ms, pct, ratio, significant, size, tok_s

STATUS_LABELS = {
    MEASURED: "measured",
    NOT_AVAILABLE: "not available here",
    DOES_NOT_FIT: "does not fit",
    FAILED: "failed",
}


def _number(value: Any) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return float(value) if math.isfinite(value) else None


def median(samples: Samples | None) -> float | None:
    """The median of a `Samples`; None when unknown."""
    return None if samples is None else _number(samples.median)


def _cell(text: str, ratio_text: str = "") -> dict[str, str]:
    return {"value": text, "ratio": ratio_text}


def metric_cells(variant: QuantVariant, ref: QuantVariant | None) -> list[dict[str, str]]:
    """The table's numbers for a measured variant, in column order, each with its ratio.

    Agreement and KL are measured against the reference already, so they have no ratio.
    """
    own = ref is not None and not variant.is_reference

    def compared(key: str, below: str, above: str, read: Any = _number) -> str:
        if not own:
            return ""
        return ratio(read(getattr(variant, key)), read(getattr(ref, key)), below, above)

    ttft, tpot = median(variant.ttft_seconds), median(variant.seconds_per_token)
    perplexity, kl = _number(variant.perplexity), _number(variant.kl_divergence)
    return [
        _cell(size(variant.weights_bytes), compared("weights_bytes", "smaller", "larger")),
        _cell(size(variant.peak_bytes), compared("peak_bytes", "smaller", "larger")),
        _cell(ms(ttft), compared("ttft_seconds", "faster", "slower", median)),
        _cell(ms(tpot), compared("seconds_per_token", "faster", "slower", median)),
        _cell(tok_s(variant.tokens_per_second),
              compared("tokens_per_second", "slower", "faster")),
        _cell(tok_s(variant.concurrency_tokens_per_second),
              compared("concurrency_tokens_per_second", "slower", "faster")),
        _cell(UNKNOWN if perplexity is None else significant(perplexity),
              compared("perplexity", "lower", "higher")),
        _cell(pct(variant.top1_agreement)),
        _cell(UNKNOWN if kl is None else f"{significant(kl)} nats"),
    ]  # fmt: skip


def variant_rows(variants: list[QuantVariant], ref: QuantVariant | None) -> list[dict[str, Any]]:
    """One row per variant; one that was not measured keeps its status and reason."""
    rows = []
    for variant in variants:
        measured = variant.status == MEASURED
        rows.append({
            "name": variant.name,
            "precision": variant.precision,
            "status": variant.status,
            "status_label": STATUS_LABELS.get(variant.status, variant.status or UNKNOWN),
            "reason": variant.reason,
            "is_reference": variant.is_reference,
            "measured": measured,
            "cells": metric_cells(variant, ref) if measured else [],
        })  # fmt: skip
    return rows


def settings_rows(variants: list[QuantVariant]) -> list[dict[str, Any]]:
    """How each variant was made (bits, group size, kept parts, library version) and how
    its decode steps ran."""
    rows = []
    for variant in variants:
        made = variant.settings
        if made is None:
            continue
        rows.append({
            "name": variant.name,
            "method": made.method or UNKNOWN,
            "weight_dtype": made.weight_dtype or UNKNOWN,
            "bits": made.bits if made.bits is not None else UNKNOWN,
            "group_size": made.group_size if made.group_size is not None else UNKNOWN,
            "compute_dtype": made.compute_dtype or UNKNOWN,
            "kept": ", ".join(made.kept_modules) or "none",
            "quantized_modules": made.quantized_modules,
            "library": made.library or UNKNOWN,
            "decode_path": variant.decode_path if variant.status == MEASURED else UNKNOWN,
            "decode_path_reason": variant.decode_path_reason,
        })  # fmt: skip
    return rows


def marked_tokens(texts: list[str], divergence: int | None) -> list[dict[str, str]]:
    """Tokens before the first divergence "same", the diverging one "diverge", the rest "after"."""
    tokens = []
    for i, text in enumerate(texts):
        state = (
            "same"
            if divergence is None or i < divergence
            else ("diverge" if i == divergence else "after")
        )
        tokens.append({"text": visible(text), "state": state})
    return tokens


def comparisons(variants: list[QuantVariant]) -> list[dict[str, Any]]:
    """Per measured variant (not the reference): each prompt's greedy output beside the
    reference's, with the first divergence marked on both sides."""
    out = []
    for variant in variants:
        if variant.is_reference or variant.status != MEASURED:
            continue
        rows = [
            {
                "prompt": sample.prompt,
                "reference": marked_tokens(sample.reference_text, sample.first_divergence),
                "variant": marked_tokens(sample.text, sample.first_divergence),
                "diverges_at": sample.first_divergence,
            }
            for sample in variant.samples
        ]
        if rows:
            out.append({"name": variant.name, "rows": rows})
    return out


def all_warnings(quantization: QuantizationResult) -> list[str]:
    warnings = list(quantization.warnings)
    for variant in quantization.variants:
        warnings += [f"{variant.name}: {w}" for w in variant.warnings]
    return warnings


def section_context(quantization: QuantizationResult | None) -> dict[str, Any] | None:
    if quantization is None:
        return None
    variants = quantization.variants
    reference = quantization.reference_variant
    measured = [v for v in variants if v.status == MEASURED]
    shown = reference or (measured[0] if measured else None)
    return {
        "raw": quantization,
        "reference": reference.name if reference else quantization.reference,
        "concurrency": shown.concurrency if shown else None,
        "variants": variant_rows(variants, reference),
        "settings": settings_rows(variants),
        "comparisons": comparisons(variants),
        "warnings": all_warnings(quantization),
    }
