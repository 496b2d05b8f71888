"""The bootstrap interval on a ratio of medians, and what it calls a win."""

from __future__ import annotations

import pytest

from profiling.measure.stats import (
    BETTER,
    INCONCLUSIVE,
    WORSE,
    Interval,
    ratio_interval,
    with_disagreement,
)


def test_a_clear_effect_has_an_interval_above_one_around_the_ratio_of_medians():
    plain = [2.00, 2.02, 1.98, 2.01, 1.99]
    fast = [1.00, 1.01, 0.99, 1.02, 0.98]
    interval = ratio_interval(plain, fast)
    assert interval.ratio == pytest.approx(2.0)
    assert 1.9 < interval.low <= interval.ratio <= interval.high < 2.1
    assert interval.verdict == BETTER and interval.repeats == 5
    assert interval.text() == (f"2.00× (95 % interval {interval.low:.2f}–{interval.high:.2f}×)")


def test_overlapping_samples_are_inconclusive_and_a_clear_loss_is_worse():
    noisy = ratio_interval([1.0, 1.5, 0.8, 1.3], [1.1, 0.9, 1.4, 1.0])
    assert noisy.low < 1.0 < noisy.high and noisy.verdict == INCONCLUSIVE
    slower = ratio_interval([1.0, 1.01, 0.99], [2.0, 2.02, 1.98])
    assert slower.verdict == WORSE


def test_one_repeat_leaves_the_spread_unknown_so_nothing_is_a_win():
    single = ratio_interval([3.0], [1.0])
    assert single.ratio == 3.0 and single.verdict == INCONCLUSIVE
    assert "one repeat" in single.text()


def test_the_same_samples_always_give_the_same_interval():
    a, b = [1.3, 1.1, 1.25, 1.4], [1.0, 1.05, 0.95, 1.1]
    first, again = ratio_interval(a, b), ratio_interval(list(a), list(b))
    assert (first.low, first.high) == (again.low, again.high)


def test_paired_repeats_cancel_a_slow_moment_of_the_machine():
    # Each pair ran together; the machine was twice as slow for the last two pairs.
    plain = [2.0, 2.0, 4.0, 4.0]
    fast = [1.0, 1.0, 2.0, 2.0]
    paired = ratio_interval(plain, fast, paired=True)
    unpaired = ratio_interval(plain, fast)
    assert paired.low == pytest.approx(2.0) and paired.high == pytest.approx(2.0)
    assert unpaired.high - unpaired.low > 1.0


def test_no_samples_or_a_zero_median_give_no_interval():
    assert ratio_interval([], [1.0]) is None
    assert ratio_interval([1.0, 1.0], [0.0, 0.0]) is None


def test_a_second_timing_that_disagrees_widens_the_interval_and_one_that_agrees_does_not():
    tight = Interval(1.105, 1.086, 1.125, repeats=6)  # one timing's repeats alone
    assert with_disagreement(tight, 1.105) == tight
    wide = with_disagreement(tight, 1.025)  # the same point timed apart: 8 % lower
    assert wide.ratio == tight.ratio and wide.repeats == tight.repeats
    assert wide.low < 1.0 < 1.2 < wide.high  # no longer a win over the bar
    # Whichever side the other timing lands, by as much on the log scale: the same interval.
    assert with_disagreement(tight, 1.105**2 / 1.025) == pytest.approx(wide)
    # Never narrower than its own interval, and a bad second figure changes nothing.
    assert with_disagreement(tight, 1.104).low <= tight.low
    assert with_disagreement(tight, 0.0) == tight
