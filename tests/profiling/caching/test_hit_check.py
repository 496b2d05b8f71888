"""The hit check: the measured warm TTFT at the replay's hit positions against the
projection fitted on the same device (`profiling.caching.hit_check`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from profiling.caching import hit_check
from profiling.caching.hit_check import (
    AGREES,
    DEMO_SAMPLE,
    INCONCLUSIVE,
    MISSES,
    QUICK_REPEATS,
    WARMUP,
    HitCheck,
    Position,
    Projected,
    cap,
    hit_positions,
    judge,
    measure_point,
)
from profiling.config import Hardware, ProfileConfig, Workload
from profiling.projection import block_cache as bc
from profiling.projection.conversation_workloads import SyntheticSpec, synthetic
from profiling.results import Samples
from tests.profiling.prefills import Prefill, Prefills, reuse_pairs

pytestmark = pytest.mark.model  # the demo model, profiled

MS = 1e-3


class ScriptedClock:
    """Runs the function and says each call took the next scripted duration."""

    def __init__(self, durations: list[float]) -> None:
        self.durations = list(durations)

    def time(self, fn: Callable[[], Any]) -> float:
        fn()
        return self.durations.pop(0)


def ms(*values: float) -> Samples:
    return Samples([v * MS for v in values])


def projected(seconds_ms: float, factor: float, cold_ms: float = 100.0) -> Projected:
    p = seconds_ms * MS
    return Projected(p, p / factor, p * factor, cold_ms * MS)


WARM = ms(2.0, 2.05, 2.1, 1.95, 2.0)
COLD = ms(9.0, 9.2, 8.9, 9.1, 9.0)


def test_a_projection_whose_interval_meets_the_measured_spread_agrees():
    verdict, ratio, why = judge(WARM, COLD, projected(2.5, factor=1.3))
    assert (verdict, why) == (AGREES, "")
    assert ratio == pytest.approx(2.0 / 2.5)


def test_a_projection_outside_its_interval_misses_by_the_ratio_of_the_medians():
    verdict, ratio, why = judge(WARM, COLD, projected(5.0, factor=1.5))
    assert verdict == MISSES and why == "by ×2.50 (measured faster)"
    assert judge(WARM, COLD, projected(1.0, factor=1.2))[2] == "by ×2.00 (measured slower)"


def test_a_hit_that_saves_nothing_measurable_is_inconclusive_however_close_the_projection():
    same = ms(2.0, 2.1, 1.9, 2.05, 1.95)
    verdict, _, why = judge(WARM, same, projected(2.0, factor=1.1))
    assert verdict == INCONCLUSIVE and "inside the noise" in why


def test_an_interval_wide_enough_to_hold_the_cold_ttft_cannot_call_a_hit():
    verdict, _, why = judge(WARM, COLD, projected(4.0, factor=3.0))
    assert verdict == INCONCLUSIVE and "holds the cold TTFT" in why


def test_noise_never_widens_agreement_a_noisy_point_is_judged_by_its_median():
    noisy = ms(2.0, 2.0, 2.0, 3.0, 1.0)  # p10–p90 1.4–2.6 ms, median 2.0
    assert noisy.noisy
    assert judge(noisy, COLD, projected(2.9, factor=1.05))[0] == MISSES
    verdict, _, why = judge(noisy, COLD, projected(2.05, factor=1.05))
    assert verdict == AGREES and "noisy" in why


def test_the_overall_verdict_misses_on_any_miss_and_never_counts_an_inconclusive_point():
    def check(*verdicts: str) -> HitCheck:
        points = [_point(v) for v in verdicts]
        return HitCheck("cpu", None, "x", points)

    assert check(AGREES, INCONCLUSIVE).verdict == AGREES
    assert check(AGREES, MISSES).verdict == MISSES
    assert check(INCONCLUSIVE, INCONCLUSIVE).verdict == INCONCLUSIVE
    assert check().verdict == INCONCLUSIVE
    assert check(AGREES, INCONCLUSIVE).summary().endswith("at 1 of 2 hit positions on cpu, "
                                                          "1 inconclusive")  # fmt: skip


def _point(verdict: str) -> Any:
    from profiling.caching.hit_check import HitPoint

    return HitPoint("c", 2, 32, 8, 32, 8, WARM, COLD, projected(2.0, 1.2), verdict, 1.0)


def test_the_positions_are_the_fewest_the_median_and_the_most_cached_tokens_among_hits():
    spec = SyntheticSpec(4, turns=5, user_tokens=20, output_tokens=12, system_tokens=40)
    conversations = synthetic(spec)
    workload = bc.Workload(conversations, bc.schedule(conversations, users=2), block_size=16)
    replay = bc.replay(workload, bc.unlimited_tokens(workload))
    hits = sorted(c for c in replay.per_request if c)
    picked = hit_positions(workload, replay)
    assert [p.cached_tokens for p in picked] == [hits[0], hits[len(hits) // 2], hits[-1]]
    for p in picked:
        turn = conversations[p.conversation].turns[p.turn - 1]
        assert p.cached_tokens + p.new_tokens == turn.prompt_tokens


def test_a_long_turn_is_scaled_down_keeping_its_cached_share():
    assert cap(Position(0, 3, 96, 20), 512) == (96, 20)
    assert cap(Position(0, 9, 1536, 512), 512) == (384, 128)
    assert cap(Position(0, 9, 100_000, 1), 512) == (511, 1)


@pytest.fixture(scope="module")
def tiny() -> Any:
    import torch
    from transformers import LlamaForCausalLM

    from tests.profiling.tiny import tiny_llama_config

    torch.manual_seed(0)
    return LlamaForCausalLM(tiny_llama_config(max_positions=256)).eval()


def alternating(cold: list[float], warm: list[float]) -> list[float]:
    """A clock's script for `measure_point`: pair i runs cold first when i is even."""
    pairs = zip(cold, warm, strict=True)
    return [t for i, (c, w) in enumerate(pairs) for t in ((c, w) if i % 2 == 0 else (w, c))]


def test_the_warm_and_cold_samples_are_the_clocks_in_their_alternating_order(tiny):
    # One warm-up then three repeats; pair i runs cold first when i is even.
    script = [9, 9, 1.0, 5.0, 6.0, 2.0, 3.0, 7.0]  # (cold, warm), (warm, cold), ...
    assert alternating([9, 5.0, 6.0, 7.0], [9, 1.0, 2.0, 3.0]) == script
    warm, cold = measure_point(tiny, list(range(60)), 48, 12, "cpu",
                               ScriptedClock(script), repeats=3)  # fmt: skip
    assert warm.samples == [1.0, 2.0, 3.0] and cold.samples == [5.0, 6.0, 7.0]


def test_the_check_fails_where_the_projection_ignores_the_cached_prefix(tiny):
    # 48 cached + 12 new tokens at a scripted 0.1 ms per token fed, ±2 %: warm about
    # 1.2 ms, cold about 6 ms. Projected right (the 12 new tokens after the cached ones)
    # it agrees; projected as the whole prompt cold, in the same ×/÷ 1.2 interval, the
    # hit's saving is far outside it.
    jitter = [1.0, 0.98, 1.02, 1.0, 0.99, 1.01, 1.0, 0.98, 1.02, 1.0]  # warm-up first
    per_token_ms = 0.1
    script = alternating([60 * per_token_ms * MS * j for j in jitter],
                         [12 * per_token_ms * MS * j for j in jitter[::-1]])  # fmt: skip
    warm, cold = measure_point(tiny, list(range(60)), 48, 12, "cpu", ScriptedClock(script),
                               repeats=QUICK_REPEATS)  # fmt: skip
    assert warm.median == pytest.approx(1.2 * MS) and cold.median == pytest.approx(6.0 * MS)
    cold_ms = 60 * per_token_ms
    right = projected(12 * per_token_ms, factor=1.2, cold_ms=cold_ms)
    assert judge(warm, cold, right) == (AGREES, pytest.approx(1.0), "")
    ignores = projected(cold_ms, factor=1.2, cold_ms=cold_ms)
    assert judge(warm, cold, ignores) == (MISSES, pytest.approx(0.2), "by ×5.00 (measured faster)")


# -- on the demo model, on CPU, with the demo conversations ---------------------------


def demo_profile(**hardware: Any) -> Any:
    from profiling.runner import run_profile

    config = ProfileConfig(
        model="demo", device="cpu", quick=True, workload=Workload(concurrency=2),
        hardware=Hardware(**hardware), conversations=DEMO_SAMPLE.read_text(),
        conversations_name=DEMO_SAMPLE.name,
    )  # fmt: skip
    return run_profile(config)


@dataclass
class DemoRun:
    profile: Any
    # Per measure_point call: (cached, new, the prefill forwards it ran).
    measured: list[tuple[int, int, list[Prefill]]]


@pytest.fixture(scope="module")
def demo_run(one_torch_thread: None) -> DemoRun:
    """The quick demo profile, every prefill the hit check ran recorded."""
    measured: list[tuple[int, int, list[Prefill]]] = []
    with pytest.MonkeyPatch.context() as patch:
        prefills = Prefills(patch)
        real = hit_check.measure_point

        def recorded(model, ids, cached, new, device, clock, repeats, warmup=WARMUP):
            start = len(prefills.calls)
            out = real(model, ids, cached, new, device, prefills.clock(clock), repeats, warmup)
            measured.append((cached, new, prefills.calls[start:]))
            return out

        patch.setattr(hit_check, "measure_point", recorded)
        return DemoRun(demo_profile(), measured)


@pytest.fixture(scope="module")
def cpu_only(demo_run: DemoRun) -> Any:
    return demo_run.profile


def test_on_the_demo_each_hit_is_measured_warm_on_its_cached_tokens_and_judged_as_measured(
    demo_run,
):
    """Exact, whatever the machine's speed: the verdicts are `judge`'s on each point's own
    samples, and warm fed only the turn's new tokens onto a cache of its own cached ones.
    Whether the projection agrees on this machine is bench/hit_check.py's to measure."""
    section = demo_run.profile.conversations
    assert "served" not in section  # no GPU named: the check stands alone
    check = HitCheck.from_dict(section["hit_check"])
    assert len(check.points) == 3 and check.capacity_tokens is None
    assert "unlimited cache" in check.note and "leave-one-out" in check.interval
    for p in check.points:  # each verdict is judge's, on the point's own samples
        judged = judge(p.warm_ttft_seconds, p.cold_ttft_seconds, p.projected)
        assert judged == (p.verdict, p.ratio, p.why)
        assert len(p.warm_ttft_seconds.samples) == len(p.cold_ttft_seconds.samples) == QUICK_REPEATS
    measured = demo_run.measured
    assert [(c, n) for c, n, _ in measured] == [(p.cached_tokens, p.new_tokens)
                                                for p in check.points]  # fmt: skip
    for cached, new, calls in measured:
        assert cached >= 16
        fill, timed = calls[0], calls[1:]  # the prefix cache, filled untimed
        assert (fill.fed, fill.held, fill.timed) == (cached, 0, False)
        pairs = reuse_pairs(timed, WARMUP + QUICK_REPEATS)
        assert len(pairs) == WARMUP + QUICK_REPEATS and all(c.timed for c in timed)
        for cold, warm in pairs:
            assert (cold.fed, cold.held) == (cached + new, 0)  # the whole prompt, cold
            assert (warm.fed, warm.held) == (new, cached)  # its new tokens, warm
            assert cold.ids == fill.ids + warm.ids  # the cache holds the prompt's own prefix


def test_the_check_round_trips_and_is_in_the_text_report(cpu_only):
    from profiling.advice.summary import render_summary

    data = cpu_only.conversations["hit_check"]
    check = HitCheck.from_dict(data)
    assert HitCheck.from_dict(check.to_dict()) == check
    assert data["verdict"] == check.verdict
    text = render_summary(cpu_only)
    assert f"hit check: {check.summary()}" in text
    assert "on the engine: not applicable on CPU" in text


def test_with_a_gpu_named_the_check_joins_the_section_at_its_kv_capacity(one_torch_thread):
    profile = demo_profile(gpu_kind="H100-SXM")
    section = profile.conversations
    check = HitCheck.from_dict(section["hit_check"])
    assert check.capacity_tokens == section["served"]["capacity_tokens"]
    assert check.points and f"{section['served']['capacity_tokens']:,} tokens" in check.note
