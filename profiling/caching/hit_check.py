"""The hit check: at the replay's hit positions, is the projected warm TTFT the measured one?

The conversation section projects TTFT with the prefix cache's hits from the turns
replayed through the block cache (`profiling.projection.block_cache`) and one prefill
chunk per turn: its new tokens after the cached ones, priced by the step model
(`profiling.projection.step_time`) on a calibration. Nothing there is measured. This
check takes a few turns the replay says hit (the fewest, the median and the most
cached tokens among them), and on the worker's own device, with the loaded model:
- measures the warm TTFT (the turn's new tokens prefilled onto a cache holding its
  cached tokens, which are the conversation's own token ids) against the cold one (the
  whole prompt onto an empty cache), warm-ups first, alternating, repeated
  (`profiling.caching.measure.time_reuse`);
- projects the warm TTFT of the same (cached, new) from the calibration fitted on this
  device, as one prefill chunk of `new` tokens at offset `cached`, with an interval
  from that calibration's own out-of-sample error: its largest leave-one-out prefill
  error (`profiling.projection.calibration.leave_one_out`) as a factor either way.

A point agrees when the measured warm TTFT's p10–p90 (its median alone where the
samples are noisy) and the projected interval overlap; else it misses by the ratio of
the measured median to the projection. A point inside the noise is inconclusive, never
a win: where its warm TTFT cannot be told from its cold one (the cold/warm ratio's 95 %
interval holds 1), or where the projected interval holds the measured cold TTFT too,
agreement would say nothing about the cache.

Torch is imported inside the functions that measure; the results are plain dataclasses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiling import serde
from profiling.measure.stats import BETTER, ratio_interval
from profiling.measure.timing import Clock
from profiling.model.shapes import Shapes
from profiling.projection import block_cache as bc
from profiling.projection.calibration import Measured, leave_one_out
from profiling.projection.conversation_workloads import Conversation, in_vocab
from profiling.projection.step_time import StepModel
from profiling.results import Samples

DEMO_SAMPLE = Path(__file__).resolve().parent.parent / "data" / "demo_conversations.jsonl"
POINTS = 3  # the fewest, the median and the most cached tokens among the hits
QUICK_MAX_TOKENS, FULL_MAX_TOKENS = 512, 2048  # cached + new, before the model's positions
WARMUP = 1
QUICK_REPEATS, FULL_REPEATS = 9, 15
AGREES, MISSES, INCONCLUSIVE = "agrees", "misses", "inconclusive"


@dataclass(frozen=True)
class Position:
    """A turn the replay found cached tokens for."""

    conversation: int  # index into the conversations
    turn: int  # 1-based, within its conversation
    cached_tokens: int
    new_tokens: int


@dataclass
class Projected:
    """The projected warm TTFT and the interval its calibration's own error gives it."""

    seconds: float
    low_seconds: float
    high_seconds: float
    cold_seconds: float  # the whole prompt at offset 0, for comparison


@dataclass
class HitPoint:
    conversation: str
    turn: int
    replayed_cached_tokens: int
    replayed_new_tokens: int
    cached_tokens: int  # as measured: the replay's, capped (see `cap`)
    new_tokens: int
    warm_ttft_seconds: Samples
    cold_ttft_seconds: Samples
    projected: Projected
    verdict: str  # AGREES, MISSES or INCONCLUSIVE
    ratio: float  # the measured warm median over the projected warm TTFT
    why: str = ""

    def text(self) -> str:
        warm, p = self.warm_ttft_seconds, self.projected
        return (f"{self.cached_tokens:,} cached + {self.new_tokens:,} new tokens: measured "
                f"{warm.median * 1e3:.3g} ms (p10–p90 {warm.p10 * 1e3:.3g}–{warm.p90 * 1e3:.3g}), "
                f"projected {p.seconds * 1e3:.3g} ms ({p.low_seconds * 1e3:.3g}–"
                f"{p.high_seconds * 1e3:.3g}), cold {self.cold_ttft_seconds.median * 1e3:.3g} ms"
                f" → {self.verdict}{' ' + self.why if self.why else ''}")  # fmt: skip


@dataclass
class HitCheck:
    device: str
    capacity_tokens: int | None  # the replay's cache (None: unlimited)
    interval: str  # how the projection's interval was derived
    points: list[HitPoint] = field(default_factory=list)
    note: str = ""

    @property
    def verdict(self) -> str:
        """MISSES where any point misses; AGREES where the rest agree, at least one
        (an inconclusive point is no win, and no loss); else INCONCLUSIVE."""
        verdicts = {p.verdict for p in self.points}
        if MISSES in verdicts:
            return MISSES
        return AGREES if AGREES in verdicts else INCONCLUSIVE

    def summary(self) -> str:
        count = {v: sum(p.verdict == v for p in self.points) for v in (AGREES, INCONCLUSIVE)}
        unsure = f", {count[INCONCLUSIVE]} inconclusive" if count[INCONCLUSIVE] else ""
        return (
            f"{self.verdict}: the projected warm TTFT agrees with the measured one at "
            f"{count[AGREES]} of {len(self.points)} hit positions on {self.device}{unsure}"
        )

    def json_extra(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "summary": self.summary()}

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HitCheck:
        return serde.from_dict(cls, data)


# -- which turns, and how much of them ------------------------------------------------


def hit_positions(workload: bc.Workload, replay: bc.Replay, count: int = POINTS) -> list[Position]:
    """Up to `count` turns that hit: the fewest, the median and the most cached tokens
    (ties to the earliest turn), in that order."""
    turns: dict[int, int] = {}
    hits = []
    for request, cached in zip(workload.requests, replay.per_request, strict=True):
        turns[request.conversation] = turns.get(request.conversation, 0) + 1
        if cached:
            new = request.prompt_tokens - cached
            hits.append(Position(request.conversation, turns[request.conversation], cached, new))
    hits.sort(key=lambda p: p.cached_tokens)
    if len(hits) <= count:
        return hits
    picks = sorted({round(i * (len(hits) - 1) / (count - 1)) for i in range(count)})
    return [hits[i] for i in picks]


def cap(position: Position, max_tokens: int) -> tuple[int, int]:
    """(cached, new) within `max_tokens` in all: a longer turn scaled down keeping its
    cached share of the prompt, which decides what the hit saves (a turn longer than
    the model's positions cannot run; at least one new token)."""
    total = position.cached_tokens + position.new_tokens
    if total <= max_tokens:
        return position.cached_tokens, position.new_tokens
    cached = min(max_tokens - 1, position.cached_tokens * max_tokens // total)
    return cached, max_tokens - cached


def token_limit(quick: bool, max_positions: int | None) -> int:
    limit = QUICK_MAX_TOKENS if quick else FULL_MAX_TOKENS
    return min(limit, max_positions) if max_positions else limit


# -- the projection and its interval ----------------------------------------------------


@dataclass(frozen=True)
class ErrorRange:
    """How far the calibration's projection strayed from a prefill it did not see:
    the largest of its leave-one-out prefill errors, as a factor either way."""

    factor: float  # ≥ 1: measured within projected ÷ factor … × factor
    low: float  # the errors' range, (predicted − measured) / measured
    high: float
    points: int

    def describe(self) -> str:
        return (f"×/÷ {self.factor:.2f}, the largest of the calibration's leave-one-out "
                f"prefill errors over its {self.points} measured prefills ({self.low:+.0%} "
                f"to {self.high:+.0%}), taken either way")  # fmt: skip


def error_range(shapes: Shapes, profile: Measured) -> ErrorRange | None:
    """The calibration's out-of-sample prefill error (see ErrorRange); None below two
    points. Either way: the sign of a few points' errors says little of the next one's,
    and a chunk after a cached prefix may sit below every prefill measured, where the
    calibration extrapolates as it did for the point it left out."""
    errors = [p.error for p in leave_one_out(shapes, profile)
              if p.metric == "prefill_seconds" and p.error is not None]  # fmt: skip
    if len(errors) < 2 or min(errors) <= -1:
        return None
    factor = math.exp(max(abs(math.log1p(e)) for e in errors))
    return ErrorRange(factor, min(errors), max(errors), len(errors))


def project_point(step: StepModel, cached: int, new: int, errors: ErrorRange) -> Projected:
    """One prefill chunk of `new` tokens at offset `cached`, within the calibration's
    error either way; the whole prompt cold beside it."""
    seconds = step.seconds(0, 0, ((new, cached),))
    cold = step.seconds(0, 0, ((cached + new, 0),))
    return Projected(seconds, seconds / errors.factor, seconds * errors.factor, cold)


def judge(warm: Samples, cold: Samples, projected: Projected) -> tuple[str, float, str]:
    """(verdict, measured median / projected, why) of one point (see the module docstring):
    a miss is a miss, but agreement inside the noise is no win."""
    ratio = warm.median / projected.seconds
    # Noisy samples are judged by their median alone: noise never widens agreement.
    low, high = (warm.median, warm.median) if warm.noisy else (warm.p10, warm.p90)
    if high < projected.low_seconds or low > projected.high_seconds:
        slower = "measured slower" if ratio > 1 else "measured faster"
        return MISSES, ratio, f"by ×{max(ratio, 1 / ratio):.2f} ({slower})"
    saving = ratio_interval(cold.samples, warm.samples, paired=True)
    if saving is None or saving.verdict != BETTER:
        told = saving.text() if saving is not None else "unknown"
        return INCONCLUSIVE, ratio, f"(the hit's saving is inside the noise: cold/warm {told})"
    if projected.low_seconds <= cold.median <= projected.high_seconds:
        return INCONCLUSIVE, ratio, ("(the projected interval holds the cold TTFT too: it "
                                     "cannot tell a hit from a miss)")  # fmt: skip
    noisy = f"(its median: the samples are noisy, spread {warm.spread:.0%})"
    return AGREES, ratio, noisy if warm.noisy else ""


# -- the measurement ---------------------------------------------------------------------


def measure_point(
    model: Any, ids: list[int], cached: int, new: int, device: str, clock: Clock,
    repeats: int, warmup: int = WARMUP,
) -> tuple[Samples, Samples]:  # fmt: skip
    """(warm, cold) TTFT of `ids[cached:cached + new]` after `ids[:cached]`."""
    # torch: it and caching.measure only in the measuring functions (module docstring)
    import torch

    from profiling.caching import measure

    tokens = torch.tensor([ids[: cached + new]], dtype=torch.long, device=device)
    prefix, ending = tokens[:, :cached], tokens[:, cached:]
    with torch.inference_mode():
        cache = measure.prefill(model, prefix)
        timed = measure.time_reuse(model, cache, prefix, [ending] * (warmup + repeats),
                                   clock=clock, warmup=warmup, repeats=repeats)  # fmt: skip
    return timed.warm, timed.cold


@dataclass
class Subject:
    """What the check measures on: the loaded model on the worker's device."""

    model: Any
    device: str
    device_name: str
    clock: Clock
    vocab_size: int
    max_positions: int | None
    quick: bool = True


def run_hit_check(
    subject: Subject, step: StepModel, errors: ErrorRange | None,
    conversations: list[Conversation], workload: bc.Workload, capacity_tokens: int | None,
    note: str = "",
) -> HitCheck:  # fmt: skip
    """The check at the hit positions of `workload` replayed at `capacity_tokens`
    (None: unlimited), projected by `step` (the calibration fitted on this device)."""
    if errors is None:
        return HitCheck(subject.device_name, capacity_tokens, "none: the calibration has "
                        "fewer than two prefill points to leave one out of", note=note)  # fmt: skip
    room = capacity_tokens if capacity_tokens is not None else bc.unlimited_tokens(workload)
    replay = bc.replay(workload, room)
    limit = token_limit(subject.quick, subject.max_positions)
    repeats = QUICK_REPEATS if subject.quick else FULL_REPEATS
    points, measured = [], set()
    for position in hit_positions(workload, replay):
        conversation = conversations[position.conversation]
        cached, new = cap(position, limit)
        if (cached, new) in measured:  # long turns capped alike: one measurement
            continue
        measured.add((cached, new))
        ids = in_vocab(conversation.tokens, subject.vocab_size)
        warm, cold = measure_point(subject.model, ids, cached, new, subject.device,
                                   subject.clock, repeats)  # fmt: skip
        projected = project_point(step, cached, new, errors)
        verdict, ratio, why = judge(warm, cold, projected)
        points.append(HitPoint(conversation.id, position.turn, position.cached_tokens,
                               position.new_tokens, cached, new, warm, cold, projected,
                               verdict, ratio, why))  # fmt: skip
    return HitCheck(subject.device_name, capacity_tokens, errors.describe(), points, note)
