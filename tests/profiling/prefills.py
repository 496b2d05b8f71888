"""The prefill forwards of the caching measurement, recorded: what each fed onto what.

Every prefill the caching experiment and the hit check run, timed or not, goes through
`profiling.caching.measure.forward`. `Prefills` wraps it and hands out clocks that mark
the forwards run inside their calls as timed, so a test can check exactly what was
timed (warm: the new tokens onto a cache holding the cached ones; cold: the whole
prompt onto an empty cache) instead of comparing noisy durations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from profiling.caching import measure
from profiling.measure.timing import Clock


@dataclass(frozen=True)
class Prefill:
    ids: tuple[int, ...]  # the token ids fed (the batch's one row)
    held: int  # tokens the cache held before
    timed: bool  # run inside a call of one of the recorder's clocks

    @property
    def fed(self) -> int:
        return len(self.ids)


class Prefills:
    """Records every `measure.forward` call while `monkeypatch` holds."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[Prefill] = []
        self._timing = False
        real = measure.forward

        def forward(model: Any, ids: Any, cache: Any) -> Any:
            held = int(cache.get_seq_length())
            self.calls.append(Prefill(tuple(ids[0].tolist()), held, self._timing))
            return real(model, ids, cache)

        monkeypatch.setattr(measure, "forward", forward)

    @property
    def timed(self) -> list[Prefill]:
        return [c for c in self.calls if c.timed]

    def clock(self, inner: Clock | None = None, seconds_per_token: float = 1e-3) -> Clock:
        """A clock marking the forwards inside its calls as timed. A call takes `inner`'s
        time, or without one `seconds_per_token` for every token its forwards fed."""
        return _MarkingClock(self, inner, seconds_per_token)


class _MarkingClock:
    def __init__(self, prefills: Prefills, inner: Clock | None, seconds_per_token: float):
        self.prefills, self.inner, self.seconds_per_token = prefills, inner, seconds_per_token

    def time(self, fn: Callable[[], Any]) -> float:
        prefills = self.prefills
        start = len(prefills.calls)
        prefills._timing = True
        try:
            if self.inner is not None:
                return self.inner.time(fn)
            fn()
        finally:
            prefills._timing = False
        return self.seconds_per_token * sum(c.fed for c in prefills.calls[start:])


def reuse_pairs(timed: list[Prefill], samples: int) -> list[tuple[Prefill, Prefill]]:
    """(cold, warm) of every sample of consecutive `measure.time_reuse` calls of `samples`
    samples each (warm-ups included): sample i of each runs cold first when i is even."""
    assert len(timed) % 2 == 0, f"{len(timed)} timed forwards: not whole pairs"
    pairs = []
    for start in range(0, len(timed), 2):
        first, second = timed[start : start + 2]
        cold_first = (start // 2) % samples % 2 == 0
        pairs.append((first, second) if cold_first else (second, first))
    return pairs
