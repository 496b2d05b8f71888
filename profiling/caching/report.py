"""The prefix-caching result in words: interpolation, the finding, warnings (no torch)."""

from __future__ import annotations

import statistics

from profiling.caching.results import CachingResult, PrefixPoint
from profiling.measure.timing import noisy_warnings


def cold_ttft(points: list[PrefixPoint]) -> float:
    """Median cold TTFT over every sample of the sweep (all at one prompt length)."""
    return statistics.median(s for p in points for s in p.cold_ttft_seconds.samples)


def interpolate_warm(points: list[PrefixPoint], share: float) -> float:
    """Warm TTFT at prefix `share`, linear between the measured shares.

    Outside the measured range it is the nearest measured point's (no
    extrapolation: a share above the largest measured one gives an upper bound).
    """
    ordered = sorted(points, key=lambda p: p.prefix_share)
    x = [p.prefix_share for p in ordered]
    y = [p.warm_ttft_seconds.median for p in ordered]
    if share <= x[0]:
        return y[0]
    for x0, x1, y0, y1 in zip(x, x[1:], y, y[1:], strict=False):
        if share <= x1:
            return y1 if x1 == x0 else y0 + (y1 - y0) * (share - x0) / (x1 - x0)
    return y[-1]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f}" if seconds >= 0.01 else f"{seconds * 1e3:,.1f}"


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.0f} %"


def finding(result: CachingResult) -> str:
    """One line: the saving the user would see, from measured numbers only."""
    sample, shared = result.prompt_sample, result.shared_prefix
    tokens = result.prompt_tokens
    if sample is not None and sample.cold_ttft_seconds and sample.warm_ttft_seconds:
        return (
            f"your prompts share {_pct(sample.reuse_fraction)} of their tokens; caching cuts "
            f"TTFT from {_ms(sample.cold_ttft_seconds)} to {_ms(sample.warm_ttft_seconds)} ms "
            f"(measured at {sample.prompt_tokens}-token prompts)"
        )
    if shared is not None:
        return (
            f"caching the shared {shared.prefix_tokens}-token prefix cuts TTFT from "
            f"{_ms(shared.cold_ttft_seconds.median)} to {_ms(shared.warm_ttft_seconds.median)} "
            f"ms at {tokens}-token prompts ({_pct(1 - shared.warm_to_cold)} less)"
        )
    reused = [p for p in result.prefix_sweep if p.prefix_tokens > 0]
    if not reused:
        return ""
    parts = [
        f"{_pct(p.prefix_share)} cached: {_ms(p.warm_ttft_seconds.median)} ms"
        for p in (reused[len(reused) // 2], reused[-1])
    ]
    cold = cold_ttft(result.prefix_sweep)
    return (
        f"at {tokens}-token prompts TTFT is {_ms(cold)} ms cold; "
        + ", ".join(dict.fromkeys(parts))
        + " (set a shared prefix or send a prompt sample for your own figure)"
    )


def warnings_for(result: CachingResult) -> list[str]:
    """Mismatched outputs, figures measured at other sizes than asked, noisy timings."""
    sample = result.prompt_sample
    extra = [result.shared_prefix, sample.measured if sample else None]
    points = result.prefix_sweep + [p for p in extra if p is not None]
    labelled = [
        (f"{p.label or 'prefix'} {p.prefix_tokens} tokens {kind}", s)
        for p in points
        for kind, s in (("cold", p.cold_ttft_seconds), ("warm", p.warm_ttft_seconds))
    ]
    return _mismatch_warnings(result, points) + _size_warnings(result) + noisy_warnings(labelled)


def _mismatch_warnings(result: CachingResult, points: list[PrefixPoint]) -> list[str]:
    where = [f"{p.prefix_tokens}-token prefix" for p in points if not p.outputs_match]
    where += [f"turn {t.turn}" for t in result.multi_turn if not t.outputs_match]
    ties = [
        f"{p.prefix_tokens}-token prefix (from generated token {p.first_divergence})"
        for p in points
        if p.outputs_match and not p.tokens_match
    ]
    out = []
    if where:
        out.append(
            "outputs with a reused cache differed from cold outputs at "
            + ", ".join(where)
            + ": logits beyond the tolerance, so the model's cache may not support prefix "
            "reuse exactly; treat those savings with care"
        )
    if ties:
        out.append(
            "greedy text with a reused cache split from the cold text at "
            + ", ".join(ties)
            + " where the logits stayed within half-precision tolerance: a near tie flipped "
            "by rounding (numerics), not a wrong cache"
        )
    return out


def _size_warnings(result: CachingResult) -> list[str]:
    out = []
    if result.prompt_tokens < result.requested_prompt_tokens:
        out.append(
            f"prompts were measured at {result.prompt_tokens} tokens, not the workload's "
            f"{result.requested_prompt_tokens} (quick mode or the model's positions)"
        )
    requested, shared = result.shared_prefix_requested_tokens, result.shared_prefix
    if shared and shared.prefix_tokens != requested:
        out.append(
            f"the workload's {requested}-token shared prefix was measured as "
            f"{shared.prefix_tokens} tokens: the same share of the measured prompt, less the "
            "last token, which is always computed"
        )
    sample = result.prompt_sample
    if sample is None:
        return out
    if sample.prompt_tokens and not 0.5 <= sample.mean_prompt_tokens / sample.prompt_tokens <= 2:
        out.append(
            f"your sample's prompts average {sample.mean_prompt_tokens:,.0f} tokens but the "
            f"TTFT figures are for {sample.prompt_tokens}-token prompts (the workload's "
            "prompt length): set the prompt length to your sample's for a closer figure"
        )
    if sample.tokenization == "bytes":
        out.append(
            "the model has no tokenizer: the prompt sample was split into UTF-8 bytes, so "
            "its token counts are byte counts (the reuse fraction is still indicative)"
        )
    return out
