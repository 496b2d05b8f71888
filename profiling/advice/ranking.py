"""The one ranking rule: every recommendation, of every technique, screened and ordered
here and nowhere else.

First the screen (`screen`): a recommendation whose own section says it cannot meet the
user's target (`Recommendation.cannot`: "even decode alone misses the 5 ms TPOT target")
is set aside with those words, and so is a figure that breaks a physical limit (its
`gain_bound`: a speculative speedup above its tokens per target pass, a quantized
speedup above the bytes it saves, a warm TTFT below the uncached part's prefill), as an
outlier with why: neither is ever shown as a measured win.

Then the order (`rank`): each recommendation read as a typed candidate (`Candidate`:
the devices it needs against the devices the job named, whether it acts on the
measured bottleneck, whether it meets the targets, its basis, its gain with the gain's
interval) and sorted by `CRITERIA`, criterion by criterion. The report's "how we rank"
sentence (`RANKING`) is written from the same list, so the sentence and the order
cannot drift apart.

Stability is computed, not assumed (`resampled`): the measured gains are drawn again
from their intervals and the rule re-run; where another recommendation comes first in a
material share of the draws, the answer names both as within the noise.

`broken_promises` checks any ranked advice against all of it (the property tests and
`bench/first_action.py` run it over stored, generated and freshly measured advice).
No torch.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from profiling.config import Workload
from profiling.technique_kit.advice_results import MEASURED, Advice, NotRecommended, Recommendation
from profiling.technique_kit.rule_kit import BOUND_MARGIN

# Draws of the measured gains the stability check re-ranks, and the share of them another
# recommendation must win for the first to be called uncertain.
DRAWS = 1000
MATERIAL_SHARE = 0.10
# What the notes say, found again by `profiling.advice.stability`.
WITHIN_NOISE = "within the noise of this machine"
OUTLIER = "an outlier, not a measured effect"
Z95 = 1.959964


@dataclass(frozen=True)
class Candidate:
    """What the rule reads of one recommendation."""

    recommendation: Recommendation
    more_devices: bool  # needs GPUs beyond those the job named
    off_bottleneck: bool  # acts on another bottleneck than the measured one
    meets: bool | None  # meets the targets (None: no target, or not known)
    measured: bool
    gain: float
    gain_low: float | None
    gain_high: float | None

    @classmethod
    def of(
        cls, r: Recommendation, bottleneck: str, w: Workload | None, devices: int | None
    ) -> Candidate:
        beyond = r.devices is not None and devices is not None and r.devices > devices
        return cls(
            recommendation=r,
            more_devices=r.more_hardware or beyond,
            off_bottleneck=r.serves != bottleneck,
            meets=meets(r, w) if w is not None else None,
            measured=r.basis == MEASURED,
            gain=r.gain,
            gain_low=r.gain_low,
            gain_high=r.gain_high,
        )


_MET = {True: 0, None: 1, False: 2}
# The order, most important first: (what the report says, the key it sorts by).
CRITERIA: tuple[tuple[str, Callable[[Candidate, float], object]], ...] = (
    ("changes to the GPUs you named before any needing more GPUs",
     lambda c, g: c.more_devices),
    ("then those acting on the measured bottleneck",
     lambda c, g: c.off_bottleneck),
    ("then those meeting your targets, then those of unknown effect on them",
     lambda c, g: _MET[c.meets]),
    ("then measured ones before estimated stand-ins",
     lambda c, g: not c.measured),
    ("then by expected gain: the factor by which the figure they act on improves (TPOT, "
     "TTFT, or requests that fit; making the workload fit counts as 10×)",
     lambda c, g: -g),
)  # fmt: skip
SCREEN = (
    "set aside first, each with why: what its own figures say cannot meet your target, and "
    "any figure above what physics allows it (an outlier, not a measured effect)"
)
RANKING = SCREEN + "; then " + "; ".join(text for text, _ in CRITERIA)


def key(c: Candidate, gain: float | None = None) -> tuple:
    g = c.gain if gain is None else gain
    return tuple(criterion(c, g) for _, criterion in CRITERIA)


def meets(r: Recommendation, w: Workload) -> bool | None:
    """Whether `r` meets the targets: its own flag, else its expected TPOT and TTFT."""
    if r.meets_targets is not None or not (w.tpot_ms or w.ttft_ms):
        return r.meets_targets
    after = {c.metric: c.after for c in r.expected_effect.changes}
    verdicts = [after["tpot_ms"] <= w.tpot_ms for _ in [0] if w.tpot_ms and "tpot_ms" in after]
    verdicts += [after["ttft_ms"] <= w.ttft_ms for _ in [0] if w.ttft_ms and "ttft_ms" in after]
    if not verdicts:
        return None
    return all(verdicts)


def rank(
    recommendations: list[Recommendation],
    bottleneck: str,
    w: Workload | None = None,
    devices: int | None = None,
) -> list[Recommendation]:
    """The recommendations in the rule's order (`CRITERIA`); `devices`: the GPUs the job
    named, against which a recommendation's own `devices` is more or not."""
    candidates = [Candidate.of(r, bottleneck, w, devices) for r in recommendations]
    return [c.recommendation for c in sorted(candidates, key=key)]


def breaks_limit(r: Recommendation) -> bool:
    """Whether the figure exceeds what physics allows it (`gain_bound`), beyond noise."""
    return r.gain_bound is not None and r.gain > r.gain_bound * BOUND_MARGIN


def screen(
    recommendations: list[Recommendation],
) -> tuple[list[Recommendation], list[NotRecommended]]:
    """(the recommendations the rule ranks, the others set aside with why): what its own
    section says cannot meet the target, and what breaks a physical limit."""
    kept, set_aside = [], []
    for r in recommendations:
        key = r.evidence[0].key if r.evidence else ""
        if r.cannot:
            set_aside.append(NotRecommended(r.technique, f"{r.setting}: {r.cannot}", key))
        elif breaks_limit(r):
            why = (
                f"{r.setting}: {r.gain:.2f}× exceeds the most it can give, "
                f"{r.gain_bound:.2f}× ({r.bound_why}): {OUTLIER} (a slow baseline sample or "
                "a noisy machine); run again with more repeats"
            )
            set_aside.append(NotRecommended(r.technique, why, key, inconclusive=True))
        else:
            kept.append(r)
    return kept, set_aside


@dataclass
class Resampled:
    """How often each recommendation came first when the measured gains were drawn again."""

    draws: int
    first_share: float  # of the ranked first
    rival: Recommendation | None  # the one that came first most often instead
    rival_share: float

    @property
    def uncertain(self) -> bool:
        return self.rival is not None and self.rival_share >= MATERIAL_SHARE


def _sigma(c: Candidate) -> float:
    """The log-gain's spread its 95 % interval implies (0 without a measured interval)."""
    if not c.measured or c.gain_low is None or c.gain_high is None:
        return 0.0
    if c.gain_low <= 0 or c.gain_high <= c.gain_low:
        return 0.0
    return (math.log(c.gain_high) - math.log(c.gain_low)) / (2 * Z95)


def resampled(
    ranked: list[Recommendation],
    bottleneck: str,
    w: Workload | None = None,
    devices: int | None = None,
    draws: int = DRAWS,
    seed: int = 0,
) -> Resampled | None:
    """The rule re-run on `draws` draws of every measured gain from its interval (a
    log-normal with the interval's spread: the repeats' bootstrap interval read back as
    their sampling distribution); None with fewer than two recommendations."""
    if len(ranked) < 2:
        return None
    candidates = [Candidate.of(r, bottleneck, w, devices) for r in ranked]
    spreads = [_sigma(c) for c in candidates]
    if not any(spreads):
        return Resampled(draws, 1.0, None, 0.0)
    rng = random.Random(seed)
    wins: Counter[int] = Counter()
    for _ in range(draws):
        gains = [
            c.gain * math.exp(rng.gauss(0.0, s)) if s else c.gain
            for c, s in zip(candidates, spreads, strict=True)
        ]
        first = min(range(len(candidates)), key=lambda i: key(candidates[i], gains[i]))
        wins[first] += 1
    others = [(n, i) for i, n in wins.items() if i != 0]
    rival_n, rival = max(others) if others else (0, None)
    return Resampled(
        draws, wins[0] / draws, ranked[rival] if rival is not None else None, rival_n / draws
    )


def uncertainty_note(found: Resampled | None, first: Recommendation | None) -> str:
    """The answer's own words where another recommendation wins a material share."""
    if found is None or not found.uncertain or first is None or found.rival is None:
        return ""
    rival = found.rival
    return (
        f"{first.setting} or {rival.setting}: {WITHIN_NOISE} ({rival.technique} came first "
        f"in {found.rival_share:.0%} of {found.draws:,} draws of the measured gains from "
        "their intervals); run with more repeats (full mode) to tell them apart"
    )


# -- the promises, checked on any ranked advice ---------------------------------------


def broken_promises(
    ranked: list[Recommendation], bottleneck: str, w: Workload | None, named: int | None
) -> list[str]:
    """Every broken promise of a ranked list, in words (empty: none)."""
    out = []
    candidates = [Candidate.of(r, bottleneck, w, named) for r in ranked]
    for i, above in enumerate(candidates):
        for below in candidates[i + 1 :]:
            if above.more_devices and not below.more_devices:
                out.append(f"{above.recommendation.setting} needs more devices and ranks above "
                           f"{below.recommendation.setting} on the named ones")  # fmt: skip
    for r in ranked:
        if r.cannot:
            out.append(f"{r.setting} is ranked though its section says: {r.cannot}")
        if breaks_limit(r):
            out.append(f"{r.setting}: {r.gain:.2f}× above its limit {r.gain_bound:.2f}×")
        low, high = r.gain_low, r.gain_high
        if low is not None and high is not None and not low - 1e-9 <= r.gain <= high + 1e-9:
            out.append(f"{r.setting}: interval {r.gain_low}–{r.gain_high} misses {r.gain}")
        batch = r.measured_at_batch
        if w is not None and batch is not None and batch != w.concurrency:
            words = " ".join([r.expected_effect.text, *r.caveats])
            if f"batch {batch}" not in words:
                out.append(f"{r.setting}: measured at batch {batch}, shown at "
                           f"{w.concurrency} without saying so")  # fmt: skip
    return out


def advice_broken_promises(advice: Advice, w: Workload, named: int | None) -> list[str]:
    """`broken_promises` of an advice, and its stability: a first action that another
    wins a material share of the resamples of is said to be within the noise, and only
    then."""
    out = broken_promises(advice.recommendations, advice.bottleneck, w, named)
    shaky = resampled(advice.recommendations, advice.bottleneck, w, named)
    said = any(WITHIN_NOISE in n for n in advice.notes)
    if shaky is not None and shaky.uncertain and not said:
        first = advice.first.setting if advice.first else ""
        out.append(f"{first} is first in only {shaky.first_share:.0%} of resamples and the "
                   "advice does not say so")  # fmt: skip
    if said and not (shaky is not None and shaky.uncertain):
        out.append("the advice says 'within the noise' of a stable first action")
    return out
