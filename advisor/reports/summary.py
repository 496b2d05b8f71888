"""The answer on one screen: the bottleneck measured against the stated one, the top
three actions with before → after at the user's workload and how sure each is, and
what to run next. Every figure is the advice's own (`Profile.advice`), so the
summary cannot disagree with the sections below it.
"""

from __future__ import annotations

from typing import Any

from advisor.reports.advice import (
    agreement,
    change_item,
    confidence_text,
    technique_label,
)
from profiling.profile import Profile
from profiling.technique_kit.advice_results import ESTIMATED, Advice, Change, Recommendation
from profiling.units import ms, pct, size, tok_s

TOP = 3
# The figure each kind of bottleneck is judged on, in order of preference.
PRIMARY = {
    "generation": ("tpot_ms", "worst_tpot_ms", "decode_tokens_per_second"),
    "prompt": ("ttft_ms",),
    "memory": ("max_concurrency", "weights_bytes", "memory_headroom_bytes"),
    "devices": ("memory_headroom_bytes", "max_concurrency"),
}


def primary_change(rec: Recommendation) -> Change | None:
    """The before → after on the figure the recommendation acts on."""
    changes = {c.metric: c for c in rec.expected_effect.changes}
    for metric in PRIMARY.get(rec.serves, ()):
        if metric in changes:
            return changes[metric]
    return rec.expected_effect.changes[0] if rec.expected_effect.changes else None


def action(rec: Recommendation) -> dict[str, Any]:
    change = primary_change(rec)
    estimated = rec.basis == ESTIMATED
    return {
        "technique": technique_label(rec.technique),
        "setting": rec.setting,
        # The same words and units as the recommendation's own list of changes.
        **(change_item(change) if change else {"metric": "", "before": "", "after": ""}),
        "effect": rec.expected_effect.text,
        "estimated": estimated,
        "confidence": confidence_text(rec),
    }


def next_steps(advice: Advice, quick: bool) -> list[str]:
    """What to run next: inside-the-noise effects first, then experiments not judged."""
    steps = []
    for n in advice.not_recommended:
        if n.inconclusive:
            more = "run the job again in full mode for more repeats" if quick else "run it again"
            label = technique_label(n.technique)
            steps.append(f"{label}: its effect was inside the noise here; {more}.")
    for m in advice.experiments_missing:
        label = technique_label(m.technique)
        if m.judged == ESTIMATED:
            steps.append(f"{label}: estimated only; tick its experiment to measure it.")
        else:
            steps.append(f"{label}: not judged; tick its experiment to measure it.")
    if not steps:
        steps.append(
            "Everything this job can measure was measured: apply the first action, then "
            "profile again to see what limits you next."
        )
    return steps


def summary_context(profile: Profile) -> dict[str, Any] | None:
    advice, verdict = profile.advice, profile.verdict
    if advice is None:
        return None
    work = profile.config.workload
    return {
        "bottleneck": advice.bottleneck_label,
        "estimated": advice.basis == ESTIMATED,
        "agreement": agreement(advice),
        "workload": (
            f"{work.prompt_tokens:,} prompt → {work.output_tokens:,} output tokens, "
            f"{work.concurrency:,} concurrent"
        ),
        "latency": (
            f"TTFT {ms(verdict.ttft_ms, 'ms')} · TPOT {ms(verdict.tpot_ms, 'ms')}"
            if verdict is not None
            else ""
        ),
        "queueing": _queueing(advice),
        "actions": [action(r) for r in advice.recommendations[:TOP]],
        "next": next_steps(advice, profile.config.quick),
    }


def _queueing(advice: Advice) -> str:
    """The queueing share of the decomposition, as the deciding numbers hold it."""
    for number in advice.deciding_numbers:
        if number.name == "queue_share":
            return (f"waiting to be scheduled: {pct(number.value)} of a request's time "
                    "(continuous batching simulated on these rates, projected)")  # fmt: skip
    return ""


def _fastest(points: list, label: str) -> str:
    best = max(points, key=lambda p: p.tokens_per_second, default=None)
    if best is None:
        return "no points were measured"
    return (
        f"{len(points)} points; fastest {tok_s(best.tokens_per_second)} of {label} "
        f"at batch {best.batch_size}"
    )


def section_findings(profile: Profile, context: dict[str, Any]) -> dict[str, str]:
    """The one line each folded section opens with, in the report's units (a technique's
    section: `views.technique_parts`, from its result's `finding_of`)."""
    verdict, memory, env = profile.verdict, profile.memory, profile.environment
    advice = profile.advice
    findings = {
        "verdict": verdict.summary if verdict is not None else "no verdict",
        "memory": (
            (context.get("verdict") or {}).get("fit") or f"weights {size(memory.weights_bytes)}"
        ),
        "prefill": _fastest(profile.prefill, "prompt"),
        "decode": _fastest(profile.decode, "output"),
        "predictions": (context.get("predictions") or {}).get("trust", "none in this result"),
        "what_if": "project this result to another GPU, GPU count, workload or dtype",
        "environment": f"{env.device_name or env.device}, torch {env.torch or '?'}",
        "warnings": f"{len(profile.warnings)} to read before trusting small differences",
    }
    if advice is not None:
        inconclusive = sum(n.inconclusive for n in advice.not_recommended)
        findings["advice"] = (
            f"{len(advice.recommendations)} recommended, {len(advice.not_recommended)} "
            f"considered and set aside ({inconclusive} inside the noise), "
            f"{len(advice.experiments_missing)} not run; the deciding numbers"
        )
    return findings


def finding_of(result: Any) -> str:
    """A technique's one-line finding, from its result."""
    return getattr(result, "finding", "") or "ran"
