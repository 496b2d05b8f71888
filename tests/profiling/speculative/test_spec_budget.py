"""The speculative sweep costed before it runs, and cut to its share of the time budget."""

from __future__ import annotations

import pytest

from profiling.model.prompts import PromptSet
from profiling.runner import PROFILE_BUDGET_S, budget_share
from profiling.speculative import budget
from profiling.speculative.experiment import SpeculativePlan
from tests.profiling.specdata import decode_point

DECODE = [decode_point(1, 100, 0.010), decode_point(8, 100, 0.020), decode_point(8, 1000, 0.040)]


def plan(ks: list[int], repeats: int = 5) -> SpeculativePlan:
    # Four prompts of 200 characters: 50 tokens each, so the context is 50 + 32/2 = 66.
    prompts = PromptSet(1, ["x" * 200] * 4)
    return SpeculativePlan(ks, [1, 8], max_new_tokens=32, prompts=prompts, warmup=1,
                           repeats=repeats)  # fmt: skip


def test_the_estimate_counts_every_timed_set_run_from_the_measured_steps() -> None:
    # One set run: batch 1, 4 batches × 32 steps × 10 ms = 1.28 s; batch 8 (one batch
    # of 4 prompts), 32 steps × 20 ms (context 66: nearest measured is 100) = 0.64 s.
    # 2 drafts × 3 K: 6 points + the target alone, once for all of them (in rounds on a
    # CPU, before the points on a GPU) = 7 timings of a warm-up and 5 runs; then the
    # confirmation, both sides afresh with twice the repeats: 2 × (warm-up + 10 runs).
    # A warm-up decodes the set's first batch: 32 steps, 0.32 s at batch 1, 0.64 s at 8.
    estimate = budget.estimate(plan([1, 2, 4]), DECODE, drafts=2)
    per_batch = [(0.32, 1.28), (0.64, 0.64)]  # (warm-up, set run) at batch 1 and 8
    assert estimate == pytest.approx(
        sum(7 * (warm + 5 * run) + 2 * (warm + 10 * run) for warm, run in per_batch)
    )
    assert budget.estimate(plan([1]), [], drafts=1) is None
    assert budget.estimate(plan([1]), DECODE, drafts=0) == 0.0


def test_over_budget_the_largest_ks_go_first_then_repeats_down_to_three() -> None:
    wide = plan([1, 2, 3, 4, 6, 8])
    costed = budget.fit(wide, DECODE, drafts=1, budget_s=40.0)
    assert wide.ks[:1] == [1] and 4 in wide.ks  # the smallest and the middle stay
    assert costed.trimmed[:2] == ["K=8 left out", "K=6 left out"]
    assert wide.repeats >= budget.MIN_REPEATS
    assert costed.seconds == budget.estimate(wide, DECODE, 1)
    roomy = plan([1, 2, 4])
    assert budget.fit(roomy, DECODE, 1, budget_s=1e6).trimmed == []
    assert roomy.ks == [1, 2, 4] and roomy.repeats == 5
    tight = plan([1, 2, 4])
    cut = budget.fit(tight, DECODE, 1, budget_s=1.0)  # cannot fit: cut to the floor
    assert tight.ks == [1, 2] and tight.repeats == budget.MIN_REPEATS  # 2 is the middle
    assert cut.trimmed == ["K=4 left out", "3 timed repeats"] and cut.seconds > 1.0


def test_each_experiment_gets_its_share_of_the_time_left_on_a_gpu_only() -> None:
    assert budget_share("cpu", 10.0, "speculative", ["speculative", "caching"]) is None
    share = budget_share("cuda", 100.0, "speculative", ["speculative", "caching"])
    # The registry weighs speculative 11, caching 2: 11/13 of the 500 s left.
    assert share == (PROFILE_BUDGET_S - 100.0) * 11 / 13
    assert budget_share("cuda", 700.0, "caching", ["caching"]) == 0.0
