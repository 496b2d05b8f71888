"""The prefill/decode disaggregation rule: only when a prefill joining decode steps
slows them."""

from __future__ import annotations

from profiling.advice import fallback
from profiling.advice.facts import Facts
from profiling.advice.rules.common import DISAGGREGATION_MIN_SPIKE, Outcome
from profiling.advice.text import gb, ms
from profiling.advice_results import (
    MEASURED,
    Change,
    Evidence,
    ExpectedEffect,
    NotRecommended,
    QualityTolerance,
    Recommendation,
)
from profiling.parallel.results import DisaggregationResult


def disaggregation(facts: Facts, goal: str, tolerance: QualityTolerance) -> list[Outcome]:
    d = facts.experiments.disaggregation
    if d is None:
        return fallback.disaggregation(facts)
    key = "disaggregation"
    if facts.workload.concurrency == 1:
        why = "one request at a time: no prefill ever joins another request's decode"
        return [NotRecommended("disaggregation", why, key)]
    if d.tpot_spike < DISAGGREGATION_MIN_SPIKE:
        why = (f"a prefill joining a decode step slows it only {d.tpot_spike:.2f}× "
               f"(threshold {DISAGGREGATION_MIN_SPIKE}×)")  # fmt: skip
        return [NotRecommended("disaggregation", why, key + ".tpot_spike")]
    return [disaggregation_recommendation(d, MEASURED)]


def disaggregation_recommendation(d: DisaggregationResult, basis: str) -> Recommendation:
    fixes_target = d.alone_meets_tpot and d.mixed_meets_tpot is False
    gain = d.tpot_spike if fixes_target else d.mean_tpot_seconds / d.decode_alone_tpot_seconds
    changes = [
        Change(
            "worst_tpot_ms",
            d.decode_mixed_tpot_seconds * 1e3,
            d.decode_alone_tpot_seconds * 1e3,
            "ms",
        ),
        Change("mean_tpot_ms", d.mean_tpot_seconds * 1e3, d.decode_alone_tpot_seconds * 1e3, "ms"),
    ]
    if d.ttft_disaggregated_seconds is not None:
        changes.append(Change("ttft_ms", d.prefill_seconds_per_request * 1e3,
                              d.ttft_disaggregated_seconds * 1e3, "ms"))  # fmt: skip
    caveats = [f"runs {d.prefill_workers + d.decode_workers} workers ({d.workers}) for your rate "
               f"of {d.request_rate_per_second:.2f} requests/s: more to operate"]  # fmt: skip
    if d.kv_transfer_seconds is not None:
        caveats.append(f"each request's KV cache ({gb(d.kv_transfer_bytes_per_request)}) crosses "
                       f"{d.link}: +{ms(d.kv_transfer_seconds)} ms TTFT")  # fmt: skip
    return Recommendation(
        technique="disaggregation",
        setting=f"disaggregate with {d.workers}",
        expected_effect=ExpectedEffect(
            f"no prefill stalls decode: worst TPOT {ms(d.decode_mixed_tpot_seconds)} → "
            f"{ms(d.decode_alone_tpot_seconds)} ms",
            changes,
        ),  # fmt: skip
        evidence=[
            Evidence(
                "#disaggregation",
                "disaggregation.tpot_spike",
                f"a prefill joining a decode step makes it {d.tpot_spike:.2f}× slower",
            )
        ],
        caveats=caveats,
        basis=basis,
        serves="generation",
        gain=gain,
    )
