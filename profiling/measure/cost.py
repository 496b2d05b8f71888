"""What a planned measurement will take, read off the baseline's own measurements.

Each experiment costs its plan before it runs (its folder's `budget.py`), from
the decode steps and prefills the baseline has just timed on this device: a
decode step at the nearest measured batch (log scale) and context, a prefill
at the nearest measured batch and a per-token rate scaled to the length asked
for. The figures are those of the reference weights; a variant with other
kernels runs faster or slower, so a plan's cost is an estimate, recorded
beside the time the experiment really took (`Profile.planned_seconds`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MIN_REPEATS = 3  # profiling.technique_kit.rule_kit.MIN_REPEATS: a win needs at least three samples
CHARS_PER_TOKEN = 4  # prompt sets are text, costed before they are tokenized


@dataclass
class Costed:
    """A plan's estimated seconds, and what was cut from it to fit a budget."""

    seconds: float
    trimmed: list[str] = field(default_factory=list)


def cut_repeats(plan: Any, out: Costed, budget_s: float, cost: Callable[[], float | None]) -> None:
    """While `out` is over `budget_s`, drop `plan.repeats` one at a time down to
    MIN_REPEATS, re-costing with `cost`; say once how many are left."""
    start = plan.repeats
    while out.seconds > budget_s and plan.repeats > MIN_REPEATS:
        plan.repeats -= 1
        out.seconds = cost() or 0.0
    if plan.repeats < start:
        out.trimmed.append(f"{plan.repeats} timed repeats")


def step_seconds(decode: list[Any], batch: int, context: int) -> float | None:
    """The measured step time at the nearest batch (log scale), then nearest context."""
    if not decode:
        return None
    nearest_batch = min(decode, key=lambda d: abs(math.log(d.batch_size / batch)))
    same = [d for d in decode if d.batch_size == nearest_batch.batch_size]
    point = min(same, key=lambda d: abs(d.context_tokens - context))
    return float(point.seconds_per_token.median)


def prefill_seconds(prefill: list[Any], tokens: int, batch: int = 1) -> float | None:
    """A prefill of `batch` prompts of `tokens` each: the nearest measured point's seconds
    per token (nearest batch, log scale, then nearest length) times the tokens asked for."""
    if not prefill or tokens <= 0:
        return None if not prefill else 0.0
    nearest_batch = min(prefill, key=lambda p: abs(math.log(p.batch_size / batch)))
    same = [p for p in prefill if p.batch_size == nearest_batch.batch_size]
    point = min(same, key=lambda p: abs(math.log(p.prompt_tokens / tokens)))
    per_token = float(point.seconds.median) / (point.prompt_tokens * point.batch_size)
    return per_token * tokens * batch


def load_seconds(profile: Any) -> float:
    """How long loading the reference took in this run (0 when not recorded)."""
    return float((getattr(profile, "phase_seconds", None) or {}).get("load", 0.0))


def record(result: Any, costed: Costed, budget_s: float | None, what: str) -> None:
    """Keep the plan's cost, its budget and its cuts on `result` (an experiment's typed
    result with planned_seconds, budget_seconds, trimmed and warnings), and warn of cuts."""
    result.planned_seconds, result.trimmed = round(costed.seconds, 1), costed.trimmed
    result.budget_seconds = budget_s
    if costed.trimmed and budget_s is not None:
        result.warnings.append(
            f"{what} was cut to fit its {budget_s:.0f} s share of the profile's time budget: "
            + "; ".join(costed.trimmed)
        )
