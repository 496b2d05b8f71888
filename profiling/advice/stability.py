"""Whether repeated runs of one job agree on their answer.

The answer of a run is its first *measured* recommendation ("" when it has
none: its actions are estimates, each marked so with the experiment to run).
Each run either gives the same answer as most runs, or says why it cannot
tell: the usual answer's effect was inconclusive in the run (inside its
noise), the run has no measured win and says so, or it notes a close call
between its first two. A measured win that most runs do not find, with no
such word, is an unstable answer. Used by the stability test and by
`bench/report.py`. No torch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from profiling.advice_results import MEASURED, Advice


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
        close = any("too close to call" in note for note in advice.notes)
        says_none = technique == "" and (not usual or usual in inconclusive)
        out.append(RunAnswer(technique, setting, technique == usual,
                             usual in inconclusive or close or says_none))  # fmt: skip
    return out


def stability_rate(advices: list[Advice]) -> float:
    """Share of runs that give the usual first technique or say why they cannot tell."""
    runs = answers(advices)
    return sum(r.stable for r in runs) / len(runs) if runs else 0.0
