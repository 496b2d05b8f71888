"""Whether to give the prefix cache a host-memory tier (KV-cache offload), and how large.

Judged on the projection of `profiling.projection.host_tier`, in this order, each
failure said with its figure:
1. no reuse: the conversations repeat less than `MIN_REUSE` of their prompt tokens
   even with room for everything;
2. fits already: the GPUs' cache keeps `FITS_SHARE` or more of the hits room for
   everything (or the tier) could reach; else a tier no larger than the GPUs' cache is
   too small to add any;
3. loads slower than recompute: at these prompt lengths the tier's hits take longer
   over the host link than the GPU takes to prefill them again;
4. the gain: the TTFT, throughput or goodput it buys must clear the rule kit's bar.
Otherwise it is recommended with the serving engine's flags (`host_tier.offload_setting`),
at the size that captures most of the gain (`host_tier.size_for_most_of_the_gain`).
"""

from __future__ import annotations

from profiling.projection.engines import DEFAULT_ENGINE
from profiling.projection.host_tier import HostTier, offload_setting, size_for_most_of_the_gain
from profiling.technique_kit.advice_results import (
    ESTIMATED,
    Change,
    Evidence,
    ExpectedEffect,
    NotRecommended,
    Recommendation,
)
from profiling.technique_kit.rule_kit import MIN_GAIN, Outcome
from profiling.units import ms, size

TECHNIQUE = "caching"
KEY = "conversations.host_tier"
MIN_REUSE = 0.05
FITS_SHARE = 0.95


def host_tier_advice(tier: HostTier, engine: str = DEFAULT_ENGINE, tp: int = 1) -> Outcome:
    """Recommend the tier on `engine` (a copy of `tp` GPUs), or say why not (see the module
    docstring)."""
    if tier.reusable_rate < MIN_REUSE:
        return NotRecommended(TECHNIQUE, f"no reuse: even with room for everything only "
                              f"{tier.reusable_rate:.0%} of prompt tokens repeat an earlier "
                              "prefix", KEY)  # fmt: skip
    reach = tier.tier_hit_rate
    if tier.gpu_hit_rate >= FITS_SHARE * tier.reusable_rate:  # whatever the tier's size
        return NotRecommended(TECHNIQUE, f"fits already: the GPUs' cache alone hits "
                              f"{tier.gpu_hit_rate:.0%} of prompt tokens, room for everything "
                              f"{tier.reusable_rate:.0%}", KEY)  # fmt: skip
    if tier.gpu_tokens is None or tier.host_tokens <= tier.gpu_tokens:
        return NotRecommended(TECHNIQUE, f"too small: the {size(tier.host_bytes)} of host memory "
                              "for the tier holds no more KV than the GPUs' own cache, which "
                              "a tier copying it adds nothing to", KEY)  # fmt: skip
    if tier.gpu_hit_rate >= FITS_SHARE * reach:
        return NotRecommended(TECHNIQUE, f"fits already: the GPUs' cache alone hits "
                              f"{tier.gpu_hit_rate:.0%} of prompt tokens, the tier would reach "
                              f"{reach:.0%}", KEY)  # fmt: skip
    if tier.load_seconds >= tier.recompute_seconds:
        return NotRecommended(TECHNIQUE, f"loads slower than recompute at this prompt length: "
                              f"{ms(tier.load_seconds)} to load the tier's hits over "
                              f"{tier.link.name} against {ms(tier.recompute_seconds)} to "
                              "prefill them again", KEY)  # fmt: skip
    return _judge_gain(tier, engine, tp)


def _judge_gain(tier: HostTier, engine: str, tp: int) -> Outcome:
    before, after = tier.without, tier.with_tier
    if after is None:
        return NotRecommended(TECHNIQUE, "the tier adds no hits", KEY)
    ttft_after = after.ttft_seconds + tier.load_ms_per_request / 1e3
    gains = {
        "TTFT": before.ttft_seconds / ttft_after,
        "throughput": after.decode_tokens_per_second / before.decode_tokens_per_second,
    }
    good_before = before.served.goodput_requests_per_second if before.served else None
    good_after = after.served.goodput_requests_per_second if after.served else None
    if good_before and good_after is not None:
        gains["goodput"] = good_after / good_before
    what, gain = max(gains.items(), key=lambda item: item[1])
    if gain < MIN_GAIN:
        return NotRecommended(TECHNIQUE, f"the tier's hits ({tier.gpu_hit_rate:.0%} → "
                              f"{tier.tier_hit_rate:.0%} of prompt tokens) buy {gain:.2f}× "
                              f"{what} at best, below the {MIN_GAIN:.2f}× bar", KEY)  # fmt: skip
    chosen = size_for_most_of_the_gain(tier) or tier.host_bytes
    changes = [Change("ttft_ms", before.ttft_seconds * 1e3, ttft_after * 1e3, "ms"),
               Change("decode_tokens_per_second", before.decode_tokens_per_second,
                      after.decode_tokens_per_second, "tokens/s")]  # fmt: skip
    text = (f"prefix-cache hits {tier.gpu_hit_rate:.0%} → {tier.tier_hit_rate:.0%} of prompt "
            f"tokens; TTFT {ms(before.ttft_seconds)} → {ms(ttft_after)}, throughput "
            f"{before.decode_tokens_per_second:,.0f} → {after.decode_tokens_per_second:,.0f} "
            "tokens/s")  # fmt: skip
    return Recommendation(
        technique=TECHNIQUE,
        setting=f"a host-memory KV tier of {size(chosen)}: {offload_setting(engine, chosen, tp)}",
        expected_effect=ExpectedEffect(text, changes),
        evidence=[Evidence("#conversations", KEY, f"{gain:.2f}× {what}")],
        caveats=[
            f"host→device link: {tier.link.name}, {tier.link.bytes_per_second / 1e9:,.0f} GB/s "
            f"({tier.link.basis}); each hit's load adds {tier.load_ms_per_request:.3g} ms to "
            "a turn's TTFT on average",
            f"{size(chosen)} captures most of the gain of the {size(tier.host_bytes)} named",
        ],
        basis=ESTIMATED,
        serves="prompt",
        gain=gain,
        confidence="estimated: a replay of the conversations through the prefix cache, "
        "served by the step model",
    )
