"""What the parallel experiment will cost before it runs, and what it leaves out to fit.

The interference measurement times, per warm-up and repeat, a decode step alone,
a prefill alone and the two together, filling the decode batch's context before
each decode (twice a sample). The measured tensor-parallel run starts one
process per rank (python and torch importing: LAUNCH_S, an assumption, not a
measurement of this machine), loads the model in the ranks and once more in
rank 0 for the one-process reference, then times a prefill and a decode step
split and whole, interleaved. Times are the baseline's measured prefills and
decode steps and its load (`profiling.measure.cost`).

With a budget (on CUDA), a plan over it leaves the measured tensor-parallel
run out (the memory plans and the interference still run), saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profiling.measure.cost import Costed, load_seconds, prefill_seconds, step_seconds

LAUNCH_S = 10.0  # starting the ranks' interpreters and torch: assumed, not measured


@dataclass
class WorkPlan:
    """What one run measures (sizes from profiling.parallel.experiment)."""

    decode_batch: int
    decode_context: int
    prefill_tokens: int
    samples: int  # warm-ups + repeats of the interference
    tp_size: int  # 0: no measured tensor-parallel run
    tp_prompt: int = 0
    tp_batch: int = 0
    tp_context: int = 0
    tp_samples: int = 0


def estimate(plan: WorkPlan, profile: Any) -> float | None:
    fill = prefill_seconds(profile.prefill, plan.decode_context, plan.decode_batch)
    prompt = prefill_seconds(profile.prefill, plan.prefill_tokens)
    step = step_seconds(profile.decode, plan.decode_batch, plan.decode_context)
    if fill is None or prompt is None or step is None:
        return None
    seconds = plan.samples * (2 * fill + 2 * step + 2 * prompt)
    if plan.tp_size:
        tp_prompt = prefill_seconds(profile.prefill, plan.tp_prompt) or 0.0
        tp_fill = prefill_seconds(profile.prefill, plan.tp_context, plan.tp_batch) or 0.0
        tp_step = step_seconds(profile.decode, plan.tp_batch, plan.tp_context) or 0.0
        timed = plan.tp_samples * 2 * (tp_prompt + tp_fill + tp_step)
        seconds += LAUNCH_S + 2 * load_seconds(profile) + timed
    return seconds


def fit(plan: WorkPlan, profile: Any, budget_s: float | None) -> Costed:
    """The plan's cost; over `budget_s`, the measured tensor-parallel run is left out."""
    cost = estimate(plan, profile)
    if cost is None:
        return Costed(0.0, ["no prefill or decode measured to cost the experiment from"])
    out = Costed(cost)
    if budget_s is not None and cost > budget_s and plan.tp_size:
        plan.tp_size = 0
        out.trimmed.append("the measured tensor-parallel run left out")
        out.seconds = estimate(plan, profile) or 0.0
    return out
