"""What the speculative sweep will cost before it runs, and a plan that fits a budget.

The sweep is most of a profile's time (it decodes the prompt set again and
again), so it is costed from the baseline's own measured decode steps before
anything runs. One set run decodes every prompt once, in batches of b:
ceil(prompts / b) batches × max_new_tokens steps × the measured step time at
the nearest measured batch and context (prompt + half the new tokens); a warm-up
decodes the set's first batch only. A
speculative set run is counted as one plain set run: it makes fewer target
passes, each over K+1 tokens, plus the draft's. Per batch size the sweep runs
warm-ups and repeats of the target alone (once, shared by every point: paired
in rounds on a CPU) and of every draft × K, then the best point again, the target's timing
too, with CONFIRM_FACTOR times the repeats (its confirmation).

With a budget (on CUDA: the sweep's share of the profile's ten minutes, from
the runner), a plan over it drops K values, largest first while the smallest
and the middle are kept, then repeats down to MIN_REPEATS (fewer are never a
win); what was cut is said in the result. Without one (CPU: tests, laptops)
nothing is cut, and the estimate is still recorded beside the time it took.
"""

from __future__ import annotations

import math
from typing import Any

from profiling.measure.cost import CHARS_PER_TOKEN, MIN_REPEATS, Costed, cut_repeats, step_seconds
from profiling.technique_kit.context import ExperimentContext

__all__ = [
    "CHARS_PER_TOKEN", "CONFIRM_FACTOR", "MIN_REPEATS", "Costed", "estimate", "fit",
    "for_context", "step_seconds",
]  # fmt: skip


# The confirmation of each batch size's best point, the one timing that decides the
# recommendation, takes this many times the sweep's repeats, speculative and target alone.
CONFIRM_FACTOR = 2


def estimate(plan: Any, decode: list[Any], drafts: int) -> float | None:
    """Seconds the sweep and its confirmations take with `plan` (SpeculativePlan)."""
    if drafts == 0:
        return 0.0
    prompts = plan.prompts.prompts
    mean_prompt = sum(len(p) for p in prompts) / max(1, len(prompts)) / CHARS_PER_TOKEN
    context = int(mean_prompt + plan.max_new_tokens / 2)
    points = drafts * len(plan.ks)
    total = 0.0
    for batch in plan.batch_sizes:
        step = step_seconds(decode, batch, context)
        if step is None:
            return None
        warm = plan.warmup * plan.max_new_tokens * step  # a warm-up decodes one batch
        set_run = math.ceil(len(prompts) / batch) * plan.max_new_tokens * step
        sweep = (points + 1) * (warm + plan.repeats * set_run)  # the target's runs shared
        confirmation = 2 * (warm + CONFIRM_FACTOR * plan.repeats * set_run)  # both afresh
        total += sweep + confirmation
    return total


def fit(plan: Any, decode: list[Any], drafts: int, budget_s: float) -> Costed:
    """Cut `plan` (in place) until its estimate fits `budget_s`, saying what was cut."""

    def cost() -> float | None:
        return estimate(plan, decode, drafts)

    first = cost()
    if first is None:
        return Costed(0.0, ["no decode step measured to cost the sweep from"])
    out = Costed(first)
    ks = sorted(plan.ks)
    keep = {ks[0], ks[len(ks) // 2]} if ks else set()  # the smallest and the middle K
    while out.seconds > budget_s and len(ks) > len(keep):
        dropped = max(k for k in ks if k not in keep)
        ks.remove(dropped)
        plan.ks = ks
        out.trimmed.append(f"K={dropped} left out")
        out.seconds = cost() or 0.0
    cut_repeats(plan, out, budget_s, cost)
    return out


def for_context(context: ExperimentContext, plan: Any, drafts: int) -> Costed:
    """The plan costed for this run, and cut to its budget where it has one (CUDA)."""
    decode = context.profile.decode
    if context.budget_s is not None:
        return fit(plan, decode, drafts, context.budget_s)
    return Costed(estimate(plan, decode, drafts) or 0.0)
