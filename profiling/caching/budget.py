"""What the prefix-cache experiment will cost before it runs, and a plan that fits a budget.

Each point (a prefix share of the sweep, the workload's shared prefix, the
prompt sample's reuse) prefills its prefix once, then times, per warm-up and
repeat, a cold prefill of the whole prompt against a warm prefill of the
ending alone, and checks outputs once: a cold and a warm prefill with greedy
tokens after each. Each turn of the conversation does the same with its one
message, then adds the message and its reply to the cache. Times are the
baseline's measured prefills and decode steps (`profiling.measure.cost`); a warm
prefill attends to its cached prefix too, which the per-token rate does not
see, so the estimate runs a little short at large shares.

With a budget (on CUDA), the plan drops repeats down to three, then the
sweep's shares down to the ends and the middle, then turns down to the quick
run's, saying what it cut.
"""

from __future__ import annotations

from typing import Any

from profiling.measure.cost import Costed, cut_repeats, prefill_seconds, step_seconds
from profiling.technique_kit.context import ExperimentContext


def estimate(plan: Any, profile: Any, extra_points: int) -> float | None:
    """Seconds the sweep, `extra_points` labelled points and the turns of `plan` take."""
    total = plan.prompt_tokens

    def fill(tokens: int) -> float | None:
        return prefill_seconds(profile.prefill, tokens)

    step = step_seconds(profile.decode, 1, total)
    whole = fill(total)
    if step is None or whole is None:
        return None
    samples = plan.warmup + plan.repeats
    check = 2 * (whole + plan.greedy_tokens * step)
    lengths = plan.prefix_lengths()
    middle = lengths[len(lengths) // 2] if lengths else 0
    seconds = 0.0
    for prefix in [*lengths, *[middle] * extra_points]:
        seconds += (fill(prefix) or 0.0) + samples * (whole + (fill(total - prefix) or 0.0))
        seconds += check
    chunk = max(1, total // (2 * plan.turns - 1))
    for turn in range(plan.turns):
        cached = 2 * turn * chunk
        timed = samples * ((fill(cached + chunk) or 0.0) + (fill(chunk) or 0.0))
        seconds += timed + check + (fill(2 * chunk) or 0.0)
    return seconds


def fit(plan: Any, profile: Any, extra_points: int, budget_s: float, quick_turns: int) -> Costed:
    """Cut `plan` (in place) until its estimate fits `budget_s`, saying what was cut;
    `quick_turns`: the quick run's turns, the fewest it cuts to."""

    def cost() -> float | None:
        return estimate(plan, profile, extra_points)

    first = cost()
    if first is None:
        return Costed(0.0, ["no prefill or decode measured to cost the sweep from"])
    out = Costed(first)
    cut_repeats(plan, out, budget_s, cost)
    shares = sorted(plan.shares)
    if out.seconds > budget_s and len(shares) > 3:
        plan.shares = [shares[0], shares[len(shares) // 2], shares[-1]]
        out.trimmed.append("prefix shares " + ", ".join(f"{s:.0%}" for s in plan.shares))
        out.seconds = cost() or 0.0
    if out.seconds > budget_s and plan.turns > quick_turns:
        plan.turns = quick_turns
        out.trimmed.append(f"{quick_turns} conversation turns")
        out.seconds = cost() or 0.0
    return out


def for_context(
    context: ExperimentContext, plan: Any, extra_points: int, quick_turns: int
) -> Costed:
    """The plan costed for this run, and cut to its budget where it has one (CUDA)."""
    if context.budget_s is not None:
        return fit(plan, context.profile, extra_points, context.budget_s, quick_turns)
    return Costed(estimate(plan, context.profile, extra_points) or 0.0)
