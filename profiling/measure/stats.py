"""How sure a measured effect is: an interval on a ratio of medians.

A technique's effect is a ratio of two measured medians (plain / speculative
step time, cold / warm TTFT, reference / quantized step time). Each side keeps
its repeats (`Samples.samples`), and the ratio's interval comes from them:
- from BOOTSTRAP_MIN repeats on, a percentile bootstrap: both sides resampled
  with replacement, the ratio of the medians taken each time, and the central
  `level` share of those ratios kept;
- below that, a bootstrap of three or five repeats is far too narrow (with
  three, its 95 % interval is about the smallest to the largest repeat, which
  holds the true median only 75 % of the time), so the interval is Student's t
  on the logarithms instead: log(ratio) ± t(n−1) × the standard error of the
  log ratio (from the pairs' differences when the repeats were interleaved,
  else from both sides' spreads).

An effect whose interval holds 1.0 ("no change") is *inconclusive*: it is
never ranked as a win. With one repeat on a side the spread is unknown, and
the effect is inconclusive too; the library's quick mode takes two or more.

The resampling is seeded from the samples themselves, so the same
measurements always give the same interval (a report re-rendered, or the same
result read twice, never changes its verdict). Pure Python, no torch.
"""

from __future__ import annotations

import hashlib
import math
import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from profiling.results import percentile

LEVEL = 0.95
DRAWS = 2000
BOOTSTRAP_MIN = 8
# Student's t, two-sided 95 %, by degrees of freedom (1 … 7: below BOOTSTRAP_MIN repeats).
T_95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365}
BETTER, WORSE, INCONCLUSIVE = "better", "worse", "inconclusive"


@dataclass
class Interval:
    """The ratio's median estimate and its `level` interval."""

    ratio: float
    low: float
    high: float
    level: float = LEVEL
    repeats: int = 0  # the fewer repeats of the two sides

    @property
    def verdict(self) -> str:
        """BETTER when the whole interval is above 1, WORSE when below, else INCONCLUSIVE."""
        if self.repeats < 2:
            return INCONCLUSIVE
        if self.low > 1.0:
            return BETTER
        if self.high < 1.0:
            return WORSE
        return INCONCLUSIVE

    def text(self) -> str:
        """ "1.42× (95 % interval 1.31–1.55×)"; one repeat says so."""
        if self.repeats < 2:
            return f"{self.ratio:.2f}× (one repeat: its spread is unknown)"
        return f"{self.ratio:.2f}× ({self.bounds()})"

    def bounds(self) -> str:
        """ "95 % interval 1.31–1.55×" """
        return f"{self.level * 100:.0f} % interval {self.low:.2f}–{self.high:.2f}×"


def _median(values: Sequence[float]) -> float:
    return percentile(sorted(values), 50)


def _seed(*sides: Sequence[float]) -> int:
    digest = hashlib.sha256()
    for side in sides:
        digest.update(struct.pack(f"<{len(side)}d", *side))
        digest.update(b"|")
    return int.from_bytes(digest.digest()[:8], "little")


def ratio_interval(
    numerator: Sequence[float],
    denominator: Sequence[float],
    level: float = LEVEL,
    draws: int = DRAWS,
    paired: bool = False,
) -> Interval | None:
    """median(numerator) / median(denominator) with its bootstrap interval; None when a
    side is empty or its median is not positive.

    `paired`: the i-th samples of both sides were taken together (interleaved
    repeats), so they are resampled together and a slow moment of the machine
    moves both sides at once.
    """
    if not numerator or not denominator:
        return None
    top, bottom = _median(numerator), _median(denominator)
    if bottom <= 0 or top <= 0:
        return None
    ratio = top / bottom
    repeats = min(len(numerator), len(denominator))
    if repeats < 2:
        return Interval(ratio, ratio, ratio, level, repeats)
    together = paired and len(numerator) == len(denominator)
    if repeats < BOOTSTRAP_MIN and level == LEVEL:
        return _t_interval(numerator, denominator, ratio, together, level)
    rng = random.Random(_seed(numerator, denominator))
    ratios = []
    for _ in range(draws):
        if together:
            picked = rng.choices(range(len(numerator)), k=len(numerator))
            a = _median([numerator[i] for i in picked])
            b = _median([denominator[i] for i in picked])
        else:
            a = _median(rng.choices(numerator, k=len(numerator)))
            b = _median(rng.choices(denominator, k=len(denominator)))
        ratios.append(a / b)
    ratios.sort()
    tail = (1 - level) / 2 * 100
    low, high = percentile(ratios, tail), percentile(ratios, 100 - tail)
    return Interval(ratio, min(low, ratio), max(high, ratio), level, repeats)


def _variance(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def _t_interval(
    numerator: Sequence[float],
    denominator: Sequence[float],
    ratio: float,
    paired: bool,
    level: float,
) -> Interval:
    top, bottom = [math.log(v) for v in numerator], [math.log(v) for v in denominator]
    if paired:
        error = math.sqrt(_variance([a - b for a, b in zip(top, bottom, strict=True)]) / len(top))
    else:
        error = math.sqrt(_variance(top) / len(top) + _variance(bottom) / len(bottom))
    repeats = min(len(top), len(bottom))
    half = T_95[repeats - 1] * error
    return Interval(ratio, ratio * math.exp(-half), ratio * math.exp(half), level, repeats)


def with_disagreement(interval: Interval, other: float) -> Interval:
    """`interval` widened by a second, separate timing of the same effect (`other`).

    Repeats within one timing share whatever the machine did during it; two timings of
    one point, minutes apart, show how far a timing moves beyond its own repeats. Their
    log-ratio difference is read as two draws of that movement (its spread: the
    difference over √2) and added to the interval's own spread in quadrature, on the
    log scale, side by side. An interval is never narrowed.
    """
    if other <= 0 or interval.ratio <= 0 or interval.low <= 0 or interval.high <= interval.low:
        return interval
    z = NormalDist().inv_cdf((1 + interval.level) / 2)
    between = abs(math.log(interval.ratio) - math.log(other)) / math.sqrt(2)
    below = math.log(interval.ratio / interval.low) / z  # each side's own spread
    above = math.log(interval.high / interval.ratio) / z
    low = min(interval.low, interval.ratio * math.exp(-z * math.hypot(below, between)))
    high = max(interval.high, interval.ratio * math.exp(z * math.hypot(above, between)))
    return Interval(interval.ratio, low, high, interval.level, interval.repeats)


def rerun_misses(low: float, high: float, bar: float, level: float = LEVEL) -> float:
    """The chance that a rerun's interval would reach below `bar`, for an effect whose
    interval [low, high] clears it: the interval read as normal on the log scale
    (σ from its width), the rerun's centre drawn around this one's with the
    uncertainty of both (√2 σ). 0.5 when the low end sits on the bar, falling as it
    clears the bar by more than the noise."""
    if low <= 0 or high <= low:
        return 0.0 if low >= bar else 1.0
    z = NormalDist().inv_cdf((1 + level) / 2)
    sigma = (math.log(high) - math.log(low)) / (2 * z)
    return NormalDist().cdf(-math.log(low / bar) / (math.sqrt(2) * sigma))
