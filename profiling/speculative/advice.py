"""The speculative-decoding rule: the measured speedup at the batch nearest the user's
concurrency."""

from __future__ import annotations

from profiling.measure.stats import Interval, ratio_interval, with_disagreement
from profiling.projection.verdict import nearest_batch
from profiling.speculative.estimate_advice import speculative_estimate
from profiling.speculative.results import PROMPT_LOOKUP, SpeculativeResult, SweepPoint
from profiling.technique_kit.advice_results import (
    MEASURED,
    Change,
    Evidence,
    ExpectedEffect,
    NotRecommended,
    QualityTolerance,
    Recommendation,
)
from profiling.technique_kit.facts import Facts
from profiling.technique_kit.rule_kit import BOUND_MARGIN, Outcome, interval_fields, judged, ms
from profiling.units import size


def speculative(
    facts: Facts, result: SpeculativeResult | None, goal: str, tolerance: QualityTolerance
) -> list[Outcome]:
    if result is None:
        return speculative_estimate(facts) or []
    if not result.sweeps:
        why = "random weights or no sweep: acceptance unknown; " + (result.finding or "")
        return [NotRecommended("speculative", why.rstrip("; "), "speculative.verify_cost")]
    batch = nearest_batch(sorted({p.batch_size for p in result.sweeps}), facts.workload.concurrency)
    points = [(i, p) for i, p in enumerate(result.sweeps) if p.batch_size == batch]
    broken = [(i, p) for i, p in points if not keeps_greedy(p)]
    if broken:
        i, p = broken[0]
        return [NotRecommended("speculative", divergence_finding(p), f"speculative.sweeps[{i}]")]
    implausible = [(i, p) for i, p in points if not plausible(p)]
    points = [(i, p) for i, p in points if plausible(p)]
    refused = [
        NotRecommended(
            "speculative",
            f"{p.draft} K={p.k}: a measured speedup of {p.speedup:.2f}× exceeds its "
            f"{p.mean_accepted_length:.2f} tokens per target pass, which no speculation can "
            "beat (each pass costs at least one plain decode step): a timing outlier, not used",
            f"speculative.sweeps[{i}]",
        )
        for i, p in implausible
    ]
    if not points:
        return refused
    return refused + _best(facts, result, points, batch)


def keeps_greedy(point: SweepPoint) -> bool:
    """Identical greedy text, or a split that is rounding at a near tie (bf16/fp16)."""
    return point.matches_baseline or point.divergence == "numerics"


def divergence_finding(point: SweepPoint) -> str:
    where = (
        f" from token {point.first_divergence} on ({point.agreement:.0%} of tokens agree)"
        if point.first_divergence is not None
        else ""
    )
    gap = f", a logit gap of {point.logit_gap:.3g} beyond rounding" if point.logit_gap else ""
    return (
        f"{point.draft} K={point.k}: the greedy text differed from plain decoding{where}{gap}: "
        "the verification did not keep the target's own choice, a finding to look into "
        "before serving it"
    )


def plausible(point: SweepPoint) -> bool:
    """Whether a speedup is possible at all: a target pass emits `mean_accepted_length`
    tokens and costs at least one plain step, so the speedup cannot exceed that."""
    return point.speedup <= point.mean_accepted_length * BOUND_MARGIN


def speedup_interval(point: SweepPoint) -> Interval | None:
    """Plain / speculative seconds over the prompt set: the ratio of the two medians, with
    its interval from the repeats (resampled in pairs where they were interleaved)."""
    return ratio_interval(
        point.baseline_seconds.samples, point.seconds.samples, paired=point.paired
    )


def _best(
    facts: Facts, result: SpeculativeResult, points: list[tuple[int, SweepPoint]], batch: int
) -> list[Outcome]:
    i, best = max(points, key=lambda ip: ip[1].speedup)
    key = f"speculative.sweeps[{i}]"
    at = f"at batch {batch} (measured batch nearest your concurrency {facts.workload.concurrency})"
    # Judged on the point timed again, where the experiment did (results since it does).
    again = next(
        ((j, c) for j, c in enumerate(result.confirmations)
         if (c.draft, c.k, c.batch_size) == (best.draft, best.k, best.batch_size)),
        None,
    )  # fmt: skip
    first = best
    if again is not None:
        j, best = again
        key = f"speculative.confirmations[{j}]"
        at += ", timed again after the sweep chose it"
        if not keeps_greedy(best) or not plausible(best):
            why = f"{best.draft} K={best.k}: the second timing did not hold ({best.speedup:.2f}×)"
            return [NotRecommended("speculative", why, key, inconclusive=True)]
    interval = speedup_interval(best)
    if interval is None:
        why = f"{best.draft} K={best.k}: no timing to judge {at}"
        return [NotRecommended("speculative", why, key)]
    if again is not None and first.speedup > 0:
        # The sweep's timing of the same point is a second draw of what a rerun sees: the
        # repeats of one timing alone understate how far the next timing lands.
        interval = with_disagreement(interval, first.speedup)
        at += f" (the interval takes in the sweep's own {first.speedup:.2f}× for it)"
    refused = judged("speculative", f"best speedup {at}, K={best.k}", interval, key)
    if refused is not None:
        return [refused]
    return [_spec_recommendation(facts, result, best, key, interval)]


def _spec_recommendation(
    facts: Facts, result: SpeculativeResult, best: SweepPoint, key: str, interval: Interval
) -> Recommendation:
    name = (
        "prompt lookup (n-gram, no draft model)"
        if best.draft == PROMPT_LOOKUP
        else f"draft {best.draft}"
    )
    tpot = facts.tpot_seconds
    speedup = interval.ratio
    after = tpot / speedup
    figure = (f"{speedup:.2f}× faster at batch {best.batch_size}, "
              f"{best.mean_accepted_length:.2f} tokens per target pass, acceptance "
              f"{best.acceptance_rate:.0%}")  # fmt: skip
    return Recommendation(
        technique="speculative",
        setting=f"{name} with K={best.k}",
        expected_effect=ExpectedEffect(
            f"decode {speedup:.2f}× faster: TPOT {ms(tpot)} → {ms(after)} ms",
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
        gain=speedup,
        **interval_fields(interval),
        gain_bound=best.mean_accepted_length,
        bound_why=(f"{best.mean_accepted_length:.2f} tokens per target pass, and each pass "
                   "costs at least one plain decode step"),
        measured_at_batch=best.batch_size,
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
        weights = size(draft.weights_bytes)
        out.append(f"extra memory: draft weights {weights} + its KV cache {size(kv)}")
    if best.batch_size != facts.workload.concurrency:
        out.append(f"measured at batch {best.batch_size}; the gain usually shrinks as batches grow")
    if best.divergence == "numerics":
        out.append(
            f"the greedy text split from plain decoding at token {best.first_divergence} "
            f"({best.agreement:.0%} of tokens agree), where the two best tokens were within "
            f"rounding (logit gap {best.logit_gap:.3g}): half-precision numerics, which batched "
            "verification and a step-by-step decode need not reproduce bit for bit"
        )
    return out
