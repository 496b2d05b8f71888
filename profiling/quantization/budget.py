"""What the quantization experiment will cost before it runs, and a plan that fits a budget.

Every variant is loaded fresh (costed as the reference's own load in this run),
then timed: TTFT over the prompt set (at least MIN_TTFT_SECONDS per prompt a
run), decode at batch 1 and at the plan's batch (the longest prompt filled once,
one untimed step, then single steps rolled back, at least MIN_DECODE_SECONDS;
on CUDA the compile of each shape is not costed), one generation for its memory peak,
and, where quality means something, one teacher-forced pass over each prompt,
the evaluation text in windows and a greedy generation per prompt. The times
are the baseline's measured prefills and decode steps (`profiling.measure.cost`): the
reference's kernels, so a variant that is slower or faster here moves the
real figure away from the estimate, which the result keeps beside it.

With a budget (on CUDA: the experiment's share of the profile's ten minutes),
the plan drops repeats down to three, then evaluation text down to the
quick run's, then prompts down to the quick run's, saying what it cut.
"""

from __future__ import annotations

import math
from typing import Any

from profiling.measure.cost import (
    CHARS_PER_TOKEN,
    Costed,
    cut_repeats,
    load_seconds,
    prefill_seconds,
    step_seconds,
)
from profiling.quantization.measure import MIN_DECODE_SECONDS, MIN_TTFT_SECONDS
from profiling.quantization.quality import EVAL_WINDOW
from profiling.technique_kit.context import ExperimentContext


def _prompt_tokens(plan: Any) -> list[int]:
    return [max(1, math.ceil(len(p) / CHARS_PER_TOKEN)) for p in plan.prompts.prompts]


def variant_seconds(plan: Any, profile: Any, with_quality: bool) -> float | None:
    """One variant: load, speed, memory peak and (with quality) the quality passes."""
    lengths = _prompt_tokens(plan)
    if not lengths:
        return 0.0
    longest, steps = max(lengths), max(0, plan.max_new_tokens - 1)
    context = longest + plan.max_new_tokens // 2
    prefill = [prefill_seconds(profile.prefill, n) for n in lengths]
    one = step_seconds(profile.decode, 1, context)
    many = step_seconds(profile.decode, plan.batch_size, context)
    fill_one = prefill_seconds(profile.prefill, longest)
    fill_many = prefill_seconds(profile.prefill, longest, plan.batch_size)
    if None in (*prefill, one, many, fill_one, fill_many):
        return None
    runs = plan.warmup + plan.repeats
    ttft = runs * max(sum(prefill), MIN_TTFT_SECONDS * len(lengths))
    # A cache filled once, one untimed step, then single steps (at least the floor).
    decode = fill_one + one + max(runs * one, MIN_DECODE_SECONDS)
    if plan.batch_size > 1:
        decode += fill_many + many + max(runs * many, MIN_DECODE_SECONDS)
    total = load_seconds(profile) + ttft + decode + fill_many + steps * many
    if with_quality:
        windows = math.ceil(plan.eval_tokens / EVAL_WINDOW)
        window = prefill_seconds(profile.prefill, min(plan.eval_tokens, EVAL_WINDOW)) or 0.0
        evaluation = windows * window
        generation = sum(prefill) + len(lengths) * steps * one
        total += sum(prefill) + evaluation + generation
    return total


def estimate(plan: Any, profile: Any, variants: int, with_quality: bool) -> float | None:
    """Seconds `variants` variants of `plan` (a QuantPlan) take, or None without figures."""
    one = variant_seconds(plan, profile, with_quality)
    return None if one is None else one * variants


def fit(
    plan: Any, profile: Any, variants: int, with_quality: bool, budget_s: float, quick: Any
) -> Costed:
    """Cut `plan` (in place) until its estimate fits `budget_s`, saying what was cut;
    `quick`: the quick run's plan, the least it cuts to."""

    def cost() -> float | None:
        return estimate(plan, profile, variants, with_quality)

    first = cost()
    if first is None:
        return Costed(0.0, ["no prefill or decode measured to cost the variants from"])
    out = Costed(first)
    cut_repeats(plan, out, budget_s, cost)
    if out.seconds > budget_s and plan.eval_tokens > quick.eval_tokens:
        plan.eval_tokens = quick.eval_tokens
        out.trimmed.append(f"{quick.eval_tokens} tokens of evaluation text")
        out.seconds = cost() or 0.0
    if out.seconds > budget_s and len(plan.prompts.prompts) > len(quick.prompts.prompts):
        plan.prompts = quick.prompts
        out.trimmed.append(f"{len(quick.prompts.prompts)} prompts")
        out.seconds = cost() or 0.0
    return out


def for_context(
    context: ExperimentContext, plan: Any, variants: int, with_quality: bool, quick: Any
) -> Costed:
    """The plan costed for this run, and cut to its budget where it has one (CUDA)."""
    if context.budget_s is not None:
        return fit(plan, context.profile, variants, with_quality, context.budget_s, quick)
    return Costed(estimate(plan, context.profile, variants, with_quality) or 0.0)
