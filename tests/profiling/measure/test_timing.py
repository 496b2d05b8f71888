"""The warm-up/repeat loop and its statistics, with a fake clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from profiling.measure.timing import CpuClock, measure, noisy_warning, noisy_warnings
from profiling.results import Samples


class FakeClock:
    """Calls the function and reports scripted durations, in order."""

    def __init__(self, durations: list[float]) -> None:
        self.durations = list(durations)
        self.calls = 0

    def time(self, fn: Callable[[], Any]) -> float:
        fn()
        self.calls += 1
        return self.durations.pop(0)


def test_warmups_are_run_but_discarded() -> None:
    calls = []
    clock = FakeClock([9.0, 9.0, 1.0, 2.0, 3.0])
    samples = measure(lambda: calls.append(1), warmup=2, repeats=3, clock=clock)
    assert samples.samples == [1.0, 2.0, 3.0]
    assert len(calls) == clock.calls == 5


def test_statistics_come_from_the_raw_samples() -> None:
    clock = FakeClock([0.5] + [float(v) for v in range(1, 12)])
    samples = measure(lambda: None, warmup=1, repeats=11, clock=clock)
    assert samples.median == 6.0
    assert samples.p10 == pytest.approx(2.0)
    assert samples.p90 == pytest.approx(10.0)
    assert samples.spread == pytest.approx(8.0 / 6.0)
    assert samples.noisy


def test_steady_samples_are_not_noisy_and_give_no_warning() -> None:
    clock = FakeClock([1.0, 1.01, 0.99, 1.0, 1.0])
    samples = measure(lambda: None, warmup=0, repeats=5, clock=clock)
    assert not samples.noisy
    assert noisy_warning("decode", samples) is None


def test_noisy_samples_give_a_warning_naming_the_point() -> None:
    warning = noisy_warning("decode batch 4", Samples([1.0, 2.0, 1.0, 3.0]))
    assert warning is not None and warning.startswith("decode batch 4: noisy")


def test_many_noisy_points_are_combined_into_one_warning() -> None:
    noisy, steady = Samples([1.0, 2.0, 3.0]), Samples([1.0, 1.0, 1.0])
    labelled = [("a", noisy), ("b", noisy), ("c", noisy), ("d", steady)]
    (warning,) = noisy_warnings(labelled)
    assert warning.startswith("3 of 4 measurements are noisy") and "a (" in warning
    assert len(noisy_warnings(labelled[:2] + labelled[3:])) == 2


def test_min_seconds_adds_samples_until_enough_time_is_measured() -> None:
    clock = FakeClock([0.125] * 100)
    samples = measure(lambda: None, warmup=1, repeats=3, clock=clock, min_seconds=1.0)
    assert len(samples.samples) == 8


def test_min_seconds_is_capped_for_very_fast_functions() -> None:
    clock = FakeClock([1e-9] * 1000)
    samples = measure(lambda: None, warmup=0, repeats=2, clock=clock, min_seconds=10.0)
    assert len(samples.samples) == 40


def test_on_sample_reports_every_call_outside_the_timed_region() -> None:
    seen: list[tuple[int, int]] = []
    measure(
        lambda: None,
        warmup=1,
        repeats=2,
        clock=FakeClock([1, 1, 1]),
        on_sample=lambda done, planned: seen.append((done, planned)),
    )
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_measure_refuses_zero_repeats() -> None:
    with pytest.raises(ValueError):
        measure(lambda: None, warmup=0, repeats=0, clock=FakeClock([]))


def test_cpu_clock_measures_real_elapsed_time() -> None:
    import time

    assert CpuClock().time(lambda: time.sleep(0.01)) >= 0.009


def test_setup_runs_before_every_call_outside_the_timing() -> None:
    order: list[str] = []
    measure(
        lambda: order.append("call"),
        warmup=1,
        repeats=2,
        clock=FakeClock([1, 1, 1]),
        setup=lambda: order.append("setup"),
    )
    assert order == ["setup", "call"] * 3
