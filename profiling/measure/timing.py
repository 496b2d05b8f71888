"""Timing: an injectable clock and a warm-up/repeat loop.

A clock times one call of a function. `CpuClock` uses `perf_counter`;
`CudaClock` records CUDA events around the call and synchronises, so the
time is the GPU's, not the launch queue's. Tests inject a fake clock with
scripted durations (`measure` calls the function through the clock, so a
fake clock decides what each call "took").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from profiling.results import NOISY_SPREAD, Samples

# With `min_seconds`, never repeat more than this many times the asked count:
# a sub-millisecond step must not turn one point into a minute-long loop.
MAX_REPEAT_FACTOR = 20


class Clock(Protocol):
    def time(self, fn: Callable[[], Any]) -> float:
        """Run `fn` once; return how long it took in seconds."""
        ...


class CpuClock:
    """Wall time with `time.perf_counter` (CPU, or any synchronous device)."""

    def time(self, fn: Callable[[], Any]) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start


class CudaClock:
    """GPU time between two CUDA events around the call."""

    def __init__(self, device: str = "cuda:0") -> None:
        # torch: kept out of the site's imports
        import torch

        self._torch = torch
        self.device = torch.device(device)

    def time(self, fn: Callable[[], Any]) -> float:
        cuda = self._torch.cuda
        start = cuda.Event(enable_timing=True)
        end = cuda.Event(enable_timing=True)
        cuda.synchronize(self.device)  # earlier queued work is not ours to time
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0


def clock_for(device: str) -> Clock:
    """The right clock for a device name ("cpu", "cuda:0", "mps")."""
    if device.startswith("cuda"):
        return CudaClock(device)
    if device == "mps":
        return _SyncClock(device)
    return CpuClock()


class _SyncClock:
    """perf_counter with an `mps` synchronise after the call."""

    def __init__(self, device: str) -> None:
        # torch: kept out of the site's imports
        import torch

        self._sync = torch.mps.synchronize

    def time(self, fn: Callable[[], Any]) -> float:
        self._sync()
        start = time.perf_counter()
        fn()
        self._sync()
        return time.perf_counter() - start


def measure(
    fn: Callable[[], Any],
    *,
    warmup: int,
    repeats: int,
    clock: Clock,
    min_seconds: float | None = None,
    on_sample: Callable[[int, int], Any] | None = None,
    setup: Callable[[], Any] | None = None,
) -> Samples:
    """Call `fn` `warmup` times (discarded), then time it `repeats` times.

    With `min_seconds`, keep repeating until the kept samples add up to at
    least that long (at most MAX_REPEAT_FACTOR × `repeats` samples), so fast
    operations get enough samples for stable percentiles. Outside the timed
    region, `setup()` runs before every call and `on_sample(done, planned)`
    after it.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError("measure needs repeats >= 1 and warmup >= 0")
    planned = warmup + repeats
    tick = on_sample or (lambda done, planned: None)

    def one() -> float:
        if setup is not None:
            setup()
        return clock.time(fn)

    for i in range(warmup):
        one()
        tick(i + 1, planned)
    samples: list[float] = []
    limit = repeats * MAX_REPEAT_FACTOR if min_seconds else repeats
    while len(samples) < repeats or (
        min_seconds and sum(samples) < min_seconds and len(samples) < limit
    ):
        samples.append(one())
        tick(warmup + len(samples), max(planned, warmup + len(samples)))
    return Samples(samples)


def noisy_warning(label: str, samples: Samples) -> str | None:
    """A warning for `Profile.warnings` when a measurement is noisy, else None."""
    if not samples.noisy:
        return None
    return (
        f"{label}: noisy measurement (p10-p90 spread {samples.spread:.0%} of the median "
        f"over {len(samples.samples)} samples); other load on the machine may have "
        "disturbed it, so treat this figure as approximate"
    )


def noisy_warnings(labelled: list[tuple[str, Samples]], max_separate: int = 2) -> list[str]:
    """Warnings for the noisy measurements among `labelled`: one each, or a
    single combined line when there are more than `max_separate`."""
    noisy = [(label, s) for label, s in labelled if s.noisy]
    if len(noisy) <= max_separate:
        return [w for label, s in noisy if (w := noisy_warning(label, s))]
    listed = "; ".join(f"{label} ({s.spread:.0%})" for label, s in noisy)
    return [
        f"{len(noisy)} of {len(labelled)} measurements are noisy (p10-p90 spread over "
        f"{NOISY_SPREAD:.0%} of the median): {listed}. Other load on the machine may have "
        "disturbed them, so treat these figures as approximate"
    ]
