"""The verdict on synthetic measured points (no model, no torch)."""

from __future__ import annotations

import pytest

from profiling.config import Workload
from profiling.projection.verdict import format_ms, interpolate, nearest_batch, verdict
from profiling.results import DecodePoint, FitCheck, PrefillPoint, Samples


def prefill(tokens: int, seconds: float, batch: int = 1) -> PrefillPoint:
    return PrefillPoint(tokens, batch, Samples([seconds]), tokens * batch / seconds, 0.0, 0.0)


def decode(batch: int, context: int, seconds: float) -> DecodePoint:
    return DecodePoint(batch, context, Samples([seconds]), batch / seconds, 0.0, 0.0)


# Prefill costs 0.1 ms per token; decode 10 ms a step at batch 8, + 1 ms per 256 of context.
PREFILL = [
    prefill(128, 0.0128),
    prefill(256, 0.0256),
    prefill(512, 0.0512),
    prefill(512, 0.2, batch=4),
]
DECODE = [
    decode(b, c, (10 if b == 8 else 5) / 1000 + c / 256 / 1000) for b in (1, 8) for c in (256, 1024)
]


def test_it_interpolates_prefill_and_decode_inside_the_sweep() -> None:
    v = verdict(PREFILL, DECODE, Workload(prompt_tokens=384, output_tokens=256, concurrency=8))
    assert v.prefill_seconds == pytest.approx(0.0384)
    step = 0.010 + (384 + 128) / 256 / 1000
    assert v.tpot_ms == pytest.approx(step * 1000)
    assert v.decode_seconds == pytest.approx(256 * step)
    assert v.ttft_ms == pytest.approx(38.4)
    assert v.end_to_end_seconds == pytest.approx(v.prefill_seconds + v.decode_seconds)
    assert v.prefill_share + v.decode_share == pytest.approx(1.0)
    assert v.dominant == "decode" and not v.interpolated


def test_it_extrapolates_beyond_the_sweep_and_flags_it() -> None:
    v = verdict(PREFILL, DECODE, Workload(prompt_tokens=2048, output_tokens=16, concurrency=8))
    assert v.prefill_seconds == pytest.approx(0.2048)
    assert v.interpolated
    assert "extrapolated" in v.basis


def test_it_uses_the_batch_nearest_the_concurrency() -> None:
    v = verdict(PREFILL, DECODE, Workload(prompt_tokens=256, output_tokens=64, concurrency=6))
    assert "batch 8" in v.basis
    assert v.interpolated  # 6 was not measured
    assert nearest_batch([1, 2, 4, 8], 3) == 4
    assert nearest_batch([1, 8], 2) == 1


def test_long_prompts_and_short_outputs_make_prefill_dominate() -> None:
    v = verdict(PREFILL, DECODE, Workload(prompt_tokens=512, output_tokens=1, concurrency=1))
    assert v.dominant == "prefill" and v.prefill_share > 0.5


def test_targets_are_compared_when_given() -> None:
    w = Workload(prompt_tokens=256, output_tokens=64, concurrency=8, ttft_ms=10, tpot_ms=50)
    v = verdict(PREFILL, DECODE, w)
    assert v.ttft_meets_target is False and v.tpot_meets_target is True
    assert verdict(PREFILL, DECODE, Workload()).ttft_meets_target is None


def test_summary_is_one_readable_line() -> None:
    v = verdict(PREFILL, DECODE, Workload(prompt_tokens=512, output_tokens=128, concurrency=8))
    assert v.summary.startswith("Decode dominates: ")
    assert "of a 512+128-token request at concurrency 8 (TTFT 51.2 ms, TPOT" in v.summary
    assert "\n" not in v.summary


def test_the_fit_check_is_carried_into_the_verdict() -> None:
    fit = FitCheck("H100-SXM", 1, 80, 8, 640, 90, 10, 100, 70, False, -30, 0)
    v = verdict(PREFILL, DECODE, Workload(), fit)
    assert v.fits is False and "does not fit" in v.summary


def test_no_verdict_without_both_phases() -> None:
    assert verdict([], DECODE, Workload()) is None
    assert verdict(PREFILL, [], Workload()) is None


def test_a_single_point_is_carried_proportionally_or_constant() -> None:
    assert interpolate([(100.0, 1.0)], 300, "proportional").value == pytest.approx(3.0)
    assert interpolate([(100.0, 1.0)], 300, "constant").value == pytest.approx(1.0)


def test_a_falling_noisy_slope_never_gives_a_negative_time() -> None:
    estimate = interpolate([(100.0, 2.0), (200.0, 1.0)], 1000, "constant")
    assert estimate.value > 0


def test_repeated_x_values_are_averaged() -> None:
    assert interpolate([(1.0, 1.0), (1.0, 3.0), (3.0, 4.0)], 2, "constant").value == 3.0


def test_milliseconds_are_shown_to_three_figures() -> None:
    assert [format_ms(x) for x in (41.0, 12.5, 0.5891, 1234.4)] == ["41", "12.5", "0.589", "1234"]
