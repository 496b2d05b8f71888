"""Quantization and prefix caching costed before they run, and cut to a time budget."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from profiling.caching import budget as caching_budget
from profiling.caching.experiment import CachingPlan
from profiling.measure import cost
from profiling.model.prompts import PromptSet
from profiling.parallel import budget as parallel_budget
from profiling.profile import Profile
from profiling.quantization import budget as quant_budget
from profiling.quantization.experiment import QuantPlan
from profiling.results import PrefillPoint, Samples
from tests.profiling.specdata import decode_point


def prefill_point(tokens: int, batch: int, seconds: float) -> PrefillPoint:
    return PrefillPoint(tokens, batch, Samples([seconds] * 3), tokens * batch / seconds, 1.0, 1.0)


# 1 ms a prompt token at batch 1 (nearest to every batch asked); decode steps of
# 10 ms at batch 1 and 20 ms at batch 4; the reference loaded in 2 s.
BASELINE = SimpleNamespace(
    prefill=[prefill_point(100, 1, 0.100)],
    decode=[decode_point(1, 100, 0.010), decode_point(4, 100, 0.020)],
    phase_seconds={"load": 2.0},
)


def test_a_prefill_is_costed_per_token_at_the_nearest_measured_point() -> None:
    points = [prefill_point(100, 1, 0.100), prefill_point(1000, 1, 2.0), prefill_point(100, 8, 0.4)]
    assert cost.prefill_seconds(points, 50) == pytest.approx(0.050)  # nearest: 100 tokens
    assert cost.prefill_seconds(points, 2000) == pytest.approx(4.0)  # nearest: 1000 tokens
    assert cost.prefill_seconds(points, 100, 8) == pytest.approx(0.4)
    assert cost.prefill_seconds([], 100) is None and cost.prefill_seconds(points, 0) == 0.0


def quant_plan(prompts: int = 2, repeats: int = 3, eval_tokens: int = 512) -> QuantPlan:
    # Prompts of 40 characters: 10 tokens each.
    return QuantPlan(["fp32", "int8"], [], PromptSet(1, ["x" * 40] * prompts), max_new_tokens=5,
                     eval_tokens=eval_tokens, batch_size=4, warmup=1, repeats=repeats)  # fmt: skip


def test_a_variant_is_costed_from_its_load_speed_peak_and_quality_passes() -> None:
    # TTFT: 4 runs × max(2 prompts × 10 ms, the 50 ms floor each) = 0.4 s. Decode at
    # batch 1: a 10 ms fill, one untimed 10 ms step, 4 steps (40 ms, under the 50 ms
    # floor) = 0.07 s; at batch 4: 40 ms fill + 20 ms + 4 × 20 ms = 0.14 s; the memory peak
    # a batch-4 generation, 40 ms + 4 steps × 20 ms = 0.12 s. With the 2 s load: 2.73 s.
    speed_only = quant_budget.variant_seconds(quant_plan(), BASELINE, with_quality=False)
    assert speed_only == pytest.approx(2.73)
    # Quality: teacher-forced 20 ms, one 512-token window 0.512 s, greedy 20 ms + 2 × 4 × 10 ms.
    with_quality = quant_budget.variant_seconds(quant_plan(), BASELINE, with_quality=True)
    assert with_quality == pytest.approx(2.73 + 0.02 + 0.512 + 0.1)
    assert quant_budget.estimate(quant_plan(), BASELINE, 3, True) == pytest.approx(3 * with_quality)
    empty = SimpleNamespace(prefill=[], decode=[], phase_seconds={})
    assert quant_budget.estimate(quant_plan(), empty, 3, True) is None


def test_the_comparison_is_cut_repeats_first_then_text_then_prompts() -> None:
    roomy = quant_plan(prompts=10, repeats=5, eval_tokens=1024)
    quick = quant_plan(prompts=4, repeats=3, eval_tokens=256)
    assert quant_budget.fit(roomy, BASELINE, 3, True, 1e6, quick).trimmed == []
    assert roomy.repeats == 5
    tight = quant_plan(prompts=10, repeats=5, eval_tokens=1024)
    cut = quant_budget.fit(tight, BASELINE, 3, True, 1.0, quick)  # cannot fit: the quick run
    assert (tight.repeats, tight.eval_tokens, len(tight.prompts.prompts)) == (3, 256, 4)
    assert cut.trimmed == ["3 timed repeats", "256 tokens of evaluation text", "4 prompts"]
    assert cut.seconds == quant_budget.estimate(tight, BASELINE, 3, True)


def caching_plan(shares: list[float], repeats: int = 3, turns: int = 2) -> CachingPlan:
    return CachingPlan(prompt_tokens=100, requested_prompt_tokens=100, shares=shares,
                       turns=turns, greedy_tokens=2, warmup=1, repeats=repeats)  # fmt: skip


def test_the_prefix_sweep_is_costed_point_by_point_and_turn_by_turn() -> None:
    # Check per point: 2 × (100 ms cold + 2 steps × 10 ms) = 0.24 s. Share 0: no prefix,
    # 4 samples × (100 + 100 ms) = 0.8 s; share 0.5: a 50 ms prefix + 4 × (100 + 50 ms).
    # Turns of 33 tokens: turn 1, 4 × (33 + 33 ms) + the check + 66 ms added to the cache;
    # turn 2, 4 × (99 + 33 ms) + the check + 66 ms.
    points = (0.8 + 0.24) + (0.05 + 0.6 + 0.24)
    turns = (0.264 + 0.24 + 0.066) + (0.528 + 0.24 + 0.066)
    estimate = caching_budget.estimate(caching_plan([0.0, 0.5]), BASELINE, extra_points=0)
    assert estimate == pytest.approx(points + turns)
    # A labelled point (the shared prefix) is costed like the sweep's middle one.
    with_shared = caching_budget.estimate(caching_plan([0.0, 0.5]), BASELINE, extra_points=1)
    assert with_shared == pytest.approx(estimate + 0.05 + 0.6 + 0.24)


def test_the_prefix_sweep_is_cut_repeats_then_shares_then_turns() -> None:
    tight = caching_plan([0.0, 0.25, 0.5, 0.75, 0.9], repeats=5, turns=4)
    cut = caching_budget.fit(tight, BASELINE, 0, budget_s=0.5, quick_turns=3)
    assert tight.repeats == cost.MIN_REPEATS and tight.shares == [0.0, 0.5, 0.9]
    assert tight.turns == 3
    assert cut.trimmed == ["3 timed repeats", "prefix shares 0%, 50%, 90%", "3 conversation turns"]
    roomy = caching_plan([0.0, 0.5], repeats=5)
    assert caching_budget.fit(roomy, BASELINE, 0, budget_s=1e6, quick_turns=3).trimmed == []


def test_the_parallel_experiment_is_costed_and_leaves_its_tp_run_out_to_fit() -> None:
    # Interference: 6 samples × 2 × (a 4 × 100-token fill 0.4 s + a 20 ms step + a 50 ms
    # prefill) = 5.64 s. The TP run: launch, the ranks' load and rank 0's (2 × 2 s), and
    # 6 samples × 2 × (10 ms prompt + 2 × 10-token fill 20 ms + 10 ms step) = 0.48 s.
    def plan(tp: int) -> parallel_budget.WorkPlan:
        return parallel_budget.WorkPlan(4, 100, 50, 6, tp, 10, 2, 10, 6)

    alone = parallel_budget.estimate(plan(0), BASELINE)
    assert alone == pytest.approx(5.64)
    with_tp = parallel_budget.estimate(plan(2), BASELINE)
    assert with_tp == pytest.approx(5.64 + parallel_budget.LAUNCH_S + 4.0 + 0.48)
    tight = plan(2)
    cut = parallel_budget.fit(tight, BASELINE, budget_s=10.0)
    assert tight.tp_size == 0 and cut.trimmed == ["the measured tensor-parallel run left out"]
    assert cut.seconds == pytest.approx(alone)
    assert parallel_budget.fit(plan(2), BASELINE, budget_s=None).trimmed == []


def test_time_spent_shows_the_plan_beside_what_it_took() -> None:
    times = SimpleNamespace(phase_seconds={"load": 1.0, "caching": 4.25})
    times.planned_seconds = {"caching": 3.5}
    assert Profile.time_spent(times) == "load 1.0 s · caching 4.2 s (planned 3.5 s)"
