"""What a speculative run adds up to: the best K per batch size and the one-line finding.

No torch import: the site can rebuild these from a stored result.
"""

from __future__ import annotations

from profiling.speculative.results import PROMPT_LOOKUP, BestK, SpeculativeResult, SweepPoint


def best_k(sweeps: list[SweepPoint]) -> list[BestK]:
    """The fastest K for each (draft, batch size), in sweep order."""
    best: dict[tuple[str, int], SweepPoint] = {}
    for point in sweeps:
        key = (point.draft, point.batch_size)
        if key not in best or point.speedup > best[key].speedup:
            best[key] = point
    return [
        BestK(p.draft, p.batch_size, p.k, p.speedup, p.tokens_per_second) for p in best.values()
    ]


def best_at(best: list[BestK], draft: str, batch_size: int, default: int) -> int:
    return next((b.k for b in best if b.draft == draft and b.batch_size == batch_size), default)


def finding(result: SpeculativeResult) -> str:
    """One measured sentence, e.g. 'draft demo-draft, K=4: 2.1 tokens per target pass, ...'."""
    if result.config_only or not result.sweeps:
        return _cost_finding(result)
    parts = []
    for draft in dict.fromkeys(p.draft for p in result.sweeps):
        points = [p for p in result.sweeps if p.draft == draft]
        smallest = min(p.batch_size for p in points)
        k = best_at(result.best_k, draft, smallest, points[0].k)
        at_k = sorted((p for p in points if p.k == k), key=lambda p: p.batch_size)
        speeds = [f"{_times(p.speedup)} at {p.batch_size}" for p in at_k[1:]]
        first = f"{_times(at_k[0].speedup)} at batch {at_k[0].batch_size}"
        parts.append(
            f"{'prompt lookup' if draft == PROMPT_LOOKUP else 'draft ' + draft}, K={k}: "
            f"{at_k[0].mean_accepted_length:.1f} tokens per target pass, "
            + ", ".join([first, *speeds])
        )
    return "; ".join(parts)


def _times(speedup: float) -> str:
    # One decimal, as people say it, unless that would round 0.96 or 1.04 to "1.0".
    text = f"{speedup:.1f}" if round(speedup, 1) != 1.0 else f"{speedup:.2f}"
    return f"{text}× faster" if speedup >= 1.0 else f"{text}× (slower)"


def _cost_finding(result: SpeculativeResult) -> str:
    """The verify cost at the K with the best bound at the smallest batch, at every batch."""
    if not result.verify_cost:
        return "no speculative measurement was made"
    smallest = min(p.batch_size for p in result.verify_cost)
    k = max(
        (p for p in result.verify_cost if p.batch_size == smallest), key=lambda p: p.speedup_bound
    ).k
    at_k = sorted((p for p in result.verify_cost if p.k == k), key=lambda p: p.batch_size)
    costs = ", ".join(
        f"{p.cost_ratio:.2f}× at batch {p.batch_size} (at most {p.speedup_bound:.1f}× faster)"
        for p in at_k
    )
    lead = "random weights: acceptance is meaningless, only the verify cost was measured; "
    return (lead if result.config_only else "") + (
        f"one target pass over K+1={k + 1} tokens costs {costs} against one token"
    )


def timing_note(result: SpeculativeResult) -> str:
    """Why the sweep's tok/s differ from the baseline's decode steps, and where they agree."""
    path = next((p.path for p in result.verify_cost if p.path), "")
    on_path = f" ({path})" if path else ""
    verify = (
        "The verify cost (one target pass over K+1 tokens against one token) runs on the "
        f"baseline's decode path{on_path}, so its one-token step is the baseline's decode step "
        "at the same batch and context."
    )
    if not result.sweeps:
        return verify
    return verify + (
        " The sweep's throughputs time our own speculative loop end to end over the whole "
        "prompt set, the target alone and with speculation alike, each batch's prefill "
        "included, on a dynamic KV cache that rolls rows back one by one (a static cache "
        "cannot drop a different number of refused tokens per row); rows that end early "
        "leave their batch smaller. They are compared only with each other, not with the "
        "baseline's decode steps."
    )


def warnings_for(result: SpeculativeResult) -> list[str]:
    """Outputs that differ one by one (beyond rounding: a finding; within it: said so);
    noisy timings summed up in one line."""
    found = [
        f"speculative {p.draft} K={p.k} batch {p.batch_size}: output differs from the "
        f"target's greedy output{_where(p)}"
        for p in result.sweeps
        if not p.matches_baseline
    ]
    noisy = [p for p in result.sweeps if p.seconds.noisy or p.baseline_seconds.noisy]
    if noisy:
        worst = max(noisy, key=lambda p: max(p.seconds.spread, p.baseline_seconds.spread))
        spread = max(worst.seconds.spread, worst.baseline_seconds.spread)
        found.append(
            f"speculative: {len(noisy)} of {len(result.sweeps)} sweep points have noisy timings "
            f"(p10-p90 spread up to {spread:.0%} of the median, {worst.draft} K={worst.k} "
            f"batch {worst.batch_size}); speedups are medians of interleaved pairs, which "
            "cancels slow drift, but treat those near 1× as uncertain"
        )
    return found


def _where(p: SweepPoint) -> str:
    if p.first_divergence is None:
        return ""
    where = f" from token {p.first_divergence} ({p.agreement:.0%} of tokens agree)"
    if p.divergence == "numerics":
        return where + ", at a near tie within half-precision rounding: numerics, not a bug"
    return where
