"""The advice section: the measured bottleneck, the ranked recommendations and
what was not recommended or not judged, built from the profile's typed `Advice`.

The library decides (`profiling.advice`); this module only says it with the
report's units and links the evidence to the sections the page really has.
Text stays plain strings here; the template's autoescape makes it safe.
"""

from __future__ import annotations

from typing import Any

from profiling.config import BOTTLENECK_LABELS
from profiling.technique_kit.advice_results import (
    ESTIMATED,
    Advice,
    Change,
    DecidingNumber,
    Evidence,
    Recommendation,
)
from profiling.techniques import technique
from profiling.units import UNKNOWN, count, ms, pct, significant, size, tok_s

# Sections a job's page always has, whatever its experiments.
ALWAYS_PRESENT = ("verdict", "advice", "memory", "prefill", "decode", "predictions", "what-if",
                  "environment")  # fmt: skip
METRIC_LABELS = {
    "prefill_share": "prefill share",
    "decode_share": "decode share",
    "ttft_ms": "TTFT",
    "tpot_ms": "TPOT",
    "decode_flops_per_byte": "decode arithmetic intensity",
    "memory_required_bytes": "memory needed",
    "memory_headroom_share": "memory headroom",
    "memory_headroom_bytes": "memory to spare",
    "max_concurrency": "requests that fit",
    "prompt_reuse_share": "prompt reuse",
    "fits_after_quantization": "fits after quantization",
    "weights_bytes": "weights",
    "decode_tokens_per_second": "decode throughput",
    "worst_tpot_ms": "worst TPOT (a prefill joins the step)",
    "mean_tpot_ms": "mean TPOT over steps",
    "measured_ttft_ms": "TTFT where measured",
}


def figure(value: Any, unit: str) -> str:
    """A deciding number or a before/after figure in the report's units."""
    if value is None:
        return UNKNOWN
    if unit == "bool":
        return "yes" if value else "no"
    if not isinstance(value, int | float):
        return str(value)
    formatters = {
        "share": pct,
        "bytes": size,
        "ms": lambda v: ms(v, "ms"),
        "s": ms,
        "tokens/s": tok_s,
        "requests": lambda v: f"{count(v)} requests",
    }
    if unit in formatters:
        return formatters[unit](value)
    return f"{significant(value)} {unit}".strip()


def metric_label(name: str) -> str:
    return METRIC_LABELS.get(name, name.replace("_", " "))


def present_anchors(report: dict[str, Any], has_warnings: bool) -> set[str]:
    """The section ids the report page will hold, from its context."""
    anchors = set(ALWAYS_PRESENT)
    if has_warnings:
        anchors.add("warnings")
    sections = ("quantization", "speculative", "caching", "parallel", "engine", "conversations")
    for section in sections:
        if report.get(section):
            anchors.add(section)
    parallel = report.get("parallel")
    if isinstance(parallel, dict) and parallel.get("disaggregation"):
        anchors.add("disaggregation")
    return anchors


def evidence_item(evidence: Evidence, anchors: set[str]) -> dict[str, str]:
    """A link when its section is on the page; otherwise the JSON key and figure as text."""
    target = evidence.anchor.removeprefix("#")
    return {
        "href": f"#{target}" if target in anchors else "",
        "key": evidence.key,
        "figure": evidence.figure,
    }


def change_item(change: Change) -> dict[str, str]:
    return {
        "metric": metric_label(change.metric),
        "before": figure(change.before, change.unit),
        "after": figure(change.after, change.unit),
    }


def confidence_text(rec: Recommendation, measured: str = "measured") -> str:
    """How sure a recommendation is, in words: its own line, else what its basis says
    (`measured` for a measured one written without a line)."""
    if rec.confidence:
        return rec.confidence
    return "estimated: not measured in this job" if rec.basis == ESTIMATED else measured


def deciding_row(number: DecidingNumber) -> dict[str, str]:
    return {
        "name": metric_label(number.name),
        "key": number.name,
        "value": figure(number.value, number.unit),
        "unit": number.unit,
        "threshold": figure(number.threshold, number.unit),
        "note": number.note,
    }


def agreement(advice: Advice) -> dict[str, Any]:
    """The stated bottleneck against the measured one: "agree", "disagree" or "unsure"."""
    state = {True: "agree", False: "disagree", None: "unsure"}[advice.agrees]
    return {
        "state": state,
        "stated": BOTTLENECK_LABELS.get(advice.stated_bottleneck, advice.stated_bottleneck),
        "note": advice.agreement_note,
    }


def section_context(advice: Advice | None, anchors: set[str]) -> dict[str, Any]:
    """The advice section's context; `{"absent": True}` for a result written before advice."""
    if advice is None:
        return {"absent": True}
    return {
        "advice": advice,
        "estimated": advice.basis == ESTIMATED,
        "deciding": [deciding_row(n) for n in advice.deciding_numbers],
        "agreement": agreement(advice),
        "recommendations": [
            {
                "technique": technique_label(rec.technique),
                "setting": rec.setting,
                "effect": rec.expected_effect.text,
                "changes": [change_item(c) for c in rec.expected_effect.changes],
                "evidence": [evidence_item(e, anchors) for e in rec.evidence],
                "caveats": rec.caveats,
                "estimated": rec.basis == ESTIMATED,
                "confidence": confidence_text(rec, measured=""),
            }
            for rec in advice.recommendations
        ],
        "not_recommended": [
            {
                "technique": technique_label(n.technique),
                "why": n.why,
                "key": n.key,
                "inconclusive": n.inconclusive,
            }
            # Inside-the-noise effects first: a rerun may still make them a win.
            for n in sorted(advice.not_recommended, key=lambda n: not n.inconclusive)
        ],  # fmt: skip
        "missing": [
            {
                "technique": technique_label(m.technique),
                "name": m.technique,
                "judged": m.judged,
                "note": m.note,
            }
            for m in advice.experiments_missing
        ],  # fmt: skip
    }


def technique_label(name: str) -> str:
    """A technique's label, as the registry declares it ("engine" and the like: its name)."""
    found = technique(name)
    return found.label if found else name
