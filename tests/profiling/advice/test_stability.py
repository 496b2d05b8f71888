"""The stability of the advice: a measured win the other runs lack, and a win too close
to its bar, are told apart from real agreement (`profiling.advice.stability`), and a
rerun's chance to miss the bar (`profiling.measure.stats.rerun_misses`).

The rate itself, over five real quick demo jobs, depends on the machine's noise: it is
measured by `python bench/report.py --runs 5`, not asserted here.
"""

from __future__ import annotations

import pytest

from profiling.advice.stability import near_the_bar, stability_rate
from profiling.measure.stats import rerun_misses
from profiling.technique_kit.advice_results import (
    ESTIMATED,
    MEASURED,
    Advice,
    ExpectedEffect,
    NotRecommended,
    QualityTolerance,
    Recommendation,
)


def advice_with(measured_win: str = "", inconclusive: str = "") -> Advice:
    recommendations = [
        Recommendation(
            "quantization", "int8", ExpectedEffect("", []), [], [], ESTIMATED, "generation", 1.2
        )
    ]
    if measured_win:
        recommendations.insert(
            0,
            Recommendation(
                measured_win, "K=2", ExpectedEffect("", []), [], [], MEASURED, "generation", 1.5
            ),
        )
    refused = [NotRecommended(inconclusive, "inside the noise", inconclusive=True)] * bool(
        inconclusive
    )
    return Advice(MEASURED, "generation", "", "", [], "unsure", None, "", recommendations,
                  refused, [], QualityTolerance(0.95, 0.05))  # fmt: skip


def test_a_measured_win_the_other_runs_lack_is_unstable_unless_they_say_why():
    quiet = [advice_with() for _ in range(4)]
    assert stability_rate([*quiet, advice_with("speculative")]) == 0.8  # a lucky run
    said = [advice_with(inconclusive="speculative") for _ in range(4)]
    assert stability_rate([*said, advice_with("speculative")]) == 0.8  # most found none
    found = [advice_with("speculative") for _ in range(4)]
    assert stability_rate([*found, advice_with(inconclusive="speculative")]) == 1.0
    assert stability_rate([*found, advice_with()]) == 0.8  # silent about the usual answer


def test_a_rerun_misses_half_the_time_on_the_bar_and_rarely_well_clear_of_it():
    assert rerun_misses(1.05, 1.25, 1.05) == pytest.approx(0.5)
    near, clear = rerun_misses(1.07, 1.25, 1.05), rerun_misses(1.30, 1.50, 1.05)
    assert 0.1 < near < 0.5 and clear < 0.001
    assert rerun_misses(1.07, 1.10, 1.05) < rerun_misses(1.07, 1.40, 1.05)  # noisier, likelier


def win(low: float, high: float) -> Recommendation:
    gain = (low * high) ** 0.5
    return Recommendation("speculative", "K=2", ExpectedEffect("", []), [], [], MEASURED,
                          "generation", gain, gain_low=low, gain_high=high)  # fmt: skip


def test_a_win_clearing_the_bar_by_less_than_its_noise_says_a_rerun_may_differ():
    note = near_the_bar([win(1.06, 1.30)])
    assert "a rerun would call it inconclusive about 4" in note, note
    assert near_the_bar([win(1.30, 1.45)]) == ""
    lucky = advice_with()
    lucky.recommendations.insert(0, win(1.06, 1.30))
    quiet = [advice_with(inconclusive="speculative") for _ in range(4)]
    assert stability_rate([*quiet, lucky]) == 0.8  # silent about its luck
    lucky.notes.append(note)
    assert stability_rate([*quiet, lucky]) == 1.0
