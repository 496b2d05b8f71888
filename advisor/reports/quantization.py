"""The quantization section: each variant against the reference, how it was made,
and its greedy outputs beside the reference's.

Built from the raw `result["quantization"]` dict the library writes. Token text
and reasons stay plain strings here; the template's autoescape is what makes
them safe. Numbers are formatted with the report's unit filters, each next to
its ratio to the reference ("3.6× smaller", "1.4× slower").
"""

from __future__ import annotations

import math
from typing import Any

from advisor.reports.speculative import size, visible
from profiling.quantization.results import DOES_NOT_FIT, FAILED, MEASURED, NOT_AVAILABLE
from profiling.units import UNKNOWN, ms, pct, significant, tok_s

STATUS_LABELS = {
    MEASURED: "measured",
    NOT_AVAILABLE: "not available here",
    DOES_NOT_FIT: "does not fit",
    FAILED: "failed",
}
# A ratio this close to 1 reads as "same" rather than "1.00× faster".
SAME_WITHIN = 1.005


def _number(value: Any) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return float(value) if math.isfinite(value) else None


def median(samples: Any) -> float | None:
    """The median of a serialised `Samples` ({"samples": [...], "median": ...})."""
    return _number(samples.get("median")) if isinstance(samples, dict) else None


def _factor(factor: float) -> str:
    if factor < 1.1:
        return f"{factor:.2f}"
    return f"{factor:.1f}" if factor < 10 else f"{factor:,.0f}"


def ratio(value: Any, reference: Any, below: str, above: str) -> str:
    """How `value` compares with the reference's: "3.6× smaller" when below it
    (with below="smaller"), "1.4× larger" when above; "" when either is unknown."""
    number, ref = _number(value), _number(reference)
    if number is None or ref is None or number <= 0 or ref <= 0:
        return ""
    factor = max(number, ref) / min(number, ref)
    if factor < SAME_WITHIN:
        return "same"
    return f"{_factor(factor)}× {below if number < ref else above}"


def _cell(text: str, ratio_text: str = "") -> dict[str, str]:
    return {"value": text, "ratio": ratio_text}


def metric_cells(variant: dict[str, Any], ref: dict[str, Any]) -> list[dict[str, str]]:
    """The table's numbers for a measured variant, in column order, each with its ratio.

    Agreement and KL are measured against the reference already, so they have no ratio.
    """
    own = variant if not variant.get("is_reference") else {}

    def compared(key: str, below: str, above: str, read: Any = _number) -> str:
        return ratio(read(own.get(key)), read(ref.get(key)), below, above) if own else ""

    ttft, tpot = median(variant.get("ttft_seconds")), median(variant.get("seconds_per_token"))
    perplexity, kl = _number(variant.get("perplexity")), _number(variant.get("kl_divergence"))
    return [
        _cell(size(variant.get("weights_bytes")), compared("weights_bytes", "smaller", "larger")),
        _cell(size(variant.get("peak_bytes")), compared("peak_bytes", "smaller", "larger")),
        _cell(ms(ttft), compared("ttft_seconds", "faster", "slower", median)),
        _cell(ms(tpot), compared("seconds_per_token", "faster", "slower", median)),
        _cell(tok_s(variant.get("tokens_per_second")),
              compared("tokens_per_second", "slower", "faster")),
        _cell(tok_s(variant.get("concurrency_tokens_per_second")),
              compared("concurrency_tokens_per_second", "slower", "faster")),
        _cell(UNKNOWN if perplexity is None else significant(perplexity),
              compared("perplexity", "lower", "higher")),
        _cell(pct(variant.get("top1_agreement"))),
        _cell(UNKNOWN if kl is None else f"{significant(kl)} nats"),
    ]  # fmt: skip


def variant_rows(variants: list[dict[str, Any]], ref: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per variant; one that was not measured keeps its status and reason."""
    rows = []
    for variant in variants:
        status = str(variant.get("status") or "")
        measured = status == MEASURED
        rows.append({
            "name": variant.get("name"),
            "precision": variant.get("precision"),
            "status": status,
            "status_label": STATUS_LABELS.get(status, status or UNKNOWN),
            "reason": variant.get("reason") or "",
            "is_reference": bool(variant.get("is_reference")),
            "measured": measured,
            "cells": metric_cells(variant, ref) if measured else [],
        })  # fmt: skip
    return rows


def settings_rows(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """How each variant was made (bits, group size, kept parts, library version)."""
    rows = []
    for variant in variants:
        made = variant.get("settings")
        if not isinstance(made, dict):
            continue
        group = made.get("group_size")
        rows.append({
            "name": variant.get("name"),
            "method": made.get("method") or UNKNOWN,
            "weight_dtype": made.get("weight_dtype") or UNKNOWN,
            "bits": made.get("bits") if made.get("bits") is not None else UNKNOWN,
            "group_size": group if group is not None else UNKNOWN,
            "compute_dtype": made.get("compute_dtype") or UNKNOWN,
            "kept": ", ".join(str(m) for m in made.get("kept_modules") or []) or "none",
            "quantized_modules": made.get("quantized_modules"),
            "library": made.get("library") or UNKNOWN,
        })  # fmt: skip
    return rows


def marked_tokens(texts: Any, divergence: Any) -> list[dict[str, str]]:
    """Tokens before the first divergence "same", the diverging one "diverge", the rest "after"."""
    at = divergence if isinstance(divergence, int) and not isinstance(divergence, bool) else None
    tokens = []
    for i, text in enumerate(texts or []):
        state = "same" if at is None or i < at else ("diverge" if i == at else "after")
        tokens.append({"text": visible(text), "state": state})
    return tokens


def comparisons(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per measured variant (not the reference): each prompt's greedy output beside the
    reference's, with the first divergence marked on both sides."""
    out = []
    for variant in variants:
        if variant.get("is_reference") or variant.get("status") != MEASURED:
            continue
        rows = []
        for sample in variant.get("samples") or []:
            divergence = sample.get("first_divergence")
            rows.append({
                "prompt": str(sample.get("prompt") or ""),
                "reference": marked_tokens(sample.get("reference_text"), divergence),
                "variant": marked_tokens(sample.get("text"), divergence),
                "diverges_at": divergence,
            })  # fmt: skip
        if rows:
            out.append({"name": variant.get("name"), "rows": rows})
    return out


def all_warnings(quantization: dict[str, Any], variants: list[dict[str, Any]]) -> list[str]:
    warnings = [str(w) for w in quantization.get("warnings") or []]
    for variant in variants:
        warnings += [f"{variant.get('name')}: {w}" for w in variant.get("warnings") or []]
    return warnings


def section_context(quantization: Any) -> dict[str, Any] | None:
    if not isinstance(quantization, dict):
        return None
    variants = [v for v in quantization.get("variants") or [] if isinstance(v, dict)]
    reference = next((v for v in variants if v.get("is_reference")), None) or {}
    measured = [v for v in variants if v.get("status") == MEASURED]
    concurrency = (reference or (measured[0] if measured else {})).get("concurrency")
    return {
        "raw": quantization,
        "reference": reference.get("name") or quantization.get("reference"),
        "concurrency": concurrency,
        "variants": variant_rows(variants, reference),
        "settings": settings_rows(variants),
        "comparisons": comparisons(variants),
        "warnings": all_warnings(quantization, variants),
    }
