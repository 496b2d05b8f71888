"""Whether repeated runs of one job agree on their answer.

The answer of a run is its first *measured* recommendation ("" when it has
none: its actions are estimates, each marked so with the experiment to run).
Each run either gives the same answer as most runs, or says why it cannot
tell: the usual answer's effect was inconclusive in the run (inside its
noise), the run has no measured win and says so, it notes that another
recommendation wins a material share of the resampled rankings
(`profiling.advice.ranking.resampled`), or it notes that its answer clears the bar worth acting
on by less than its own noise (`near_the_bar`). A measured win that most runs do not find, with no
such word, is an unstable answer. Used by the stability test and by
`bench/report.py`. No torch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from profiling.advice.ranking import WITHIN_NOISE
from profiling.measure.stats import rerun_misses
from profiling.technique_kit.advice_results import MEASURED, Advice, Recommendation
from profiling.technique_kit.rule_kit import MIN_GAIN

RERUNS_DIFFER = "a rerun would call it inconclusive"


@dataclass
class RunAnswer:
    top: str  # the first recommendation's technique, "" when there is none
    setting: str
    agrees: bool  # names the usual first technique
    cannot_tell: bool  # says why it cannot tell (inconclusive or a close call)

    @property
    def stable(self) -> bool:
        return self.agrees or self.cannot_tell


def _top(advice: Advice) -> tuple[str, str]:
    first = next((r for r in advice.recommendations if r.basis == MEASURED), None)
    return (first.technique, first.setting) if first else ("", "")


def answers(advices: list[Advice]) -> list[RunAnswer]:
    tops = [_top(a) for a in advices]
    usual = Counter(technique for technique, _ in tops).most_common(1)[0][0] if tops else ""
    out = []
    for advice, (technique, setting) in zip(advices, tops, strict=True):
        inconclusive = {n.technique for n in advice.not_recommended if n.inconclusive}
        close = any(WITHIN_NOISE in note or RERUNS_DIFFER in note for note in advice.notes)
        says_none = technique == "" and (not usual or usual in inconclusive)
        out.append(RunAnswer(technique, setting, technique == usual,
                             usual in inconclusive or close or says_none))  # fmt: skip
    return out


def stability_rate(advices: list[Advice]) -> float:
    """Share of runs that give the usual first technique or say why they cannot tell."""
    runs = answers(advices)
    return sum(r.stable for r in runs) / len(runs) if runs else 0.0


# -- the notes a run gives when its own answer may differ on a rerun ----------


# A measured answer a rerun would fail to confirm this often or more is said to be close.
RERUN_RISK = 0.10


def near_the_bar(recommendations: list[Recommendation]) -> str:
    """A note when the first measured recommendation clears the MIN_GAIN bar by less
    than its own noise: a rerun would, often enough, find the effect inconclusive."""
    first = next((r for r in recommendations if r.basis == MEASURED), None)
    if first is None or first.gain_low is None or first.gain_high is None:
        return ""
    risk = rerun_misses(first.gain_low, first.gain_high, MIN_GAIN)
    if risk < RERUN_RISK:
        return ""
    return (
        f"{first.technique} ({first.gain:.2f}×, interval {first.gain_low:.2f}–"
        f"{first.gain_high:.2f}×) clears the {MIN_GAIN:.2f}× worth acting on by less than "
        f"its noise: {RERUNS_DIFFER} about {risk:.0%} of the time "
        "(full mode takes more repeats)"
    )
