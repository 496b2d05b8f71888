"""The parallelism rule: the fewest devices that fit, and the measured tensor-parallel run."""

from __future__ import annotations

from profiling.advice import fallback
from profiling.advice.facts import Facts
from profiling.advice.fallback import MAKES_IT_FIT
from profiling.advice.rules.common import Outcome
from profiling.advice.text import gb
from profiling.advice_results import (
    ESTIMATED,
    MEASURED,
    Change,
    Evidence,
    ExpectedEffect,
    NotRecommended,
    QualityTolerance,
    Recommendation,
)
from profiling.parallel.results import BASIS_MEASURED


def parallel(facts: Facts, goal: str, tolerance: QualityTolerance) -> list[Outcome]:
    result = facts.experiments.parallel
    if result is None:
        return fallback.parallel(facts, goal)
    measured = result.measured
    if measured.status == "failed":
        why = f"the tensor-parallel run failed: {measured.reason}"
        return [NotRecommended("parallel", why, "parallel.measured")]
    if measured.status == "measured" and measured.logits_match is False:
        why = "split over processes the model's logits differed from one process (a failed check)"
        return [NotRecommended("parallel", why, "parallel.measured")]
    if not fallback.needs_more_devices(facts, goal):
        return [fallback.parallel_not_needed(facts)]
    plan = result.fewest_devices
    if plan is None:
        why = "no tensor × pipeline split of up to 8 devices fits weights and KV cache"
        return [NotRecommended("parallel", why, "parallel.plans")]
    index = result.plans.index(plan)
    gpu = facts.gpu.label if facts.gpu else "devices"
    pp = f" × PP={plan.pp}" if plan.pp > 1 else ""
    changes = [Change("devices", facts.gpu_count, plan.devices, "GPUs"),
               Change("bytes_per_device", facts.fit.required_bytes / facts.gpu_count
                      if facts.fit else 0.0, plan.bytes_per_device, "bytes")]  # fmt: skip
    if measured.decode_ratio:
        tpot = facts.tpot_seconds
        changes.append(Change("tpot_ms", tpot * 1e3, tpot * measured.decode_ratio * 1e3, "ms"))
    usable = gb(plan.available_bytes_per_device or 0)
    figure = f"{gb(plan.bytes_per_device)} per device against {usable} usable"
    return [Recommendation(
        technique="parallel",
        setting=f"TP={plan.tp}{pp} on {plan.devices}× {gpu}",
        expected_effect=ExpectedEffect(f"fits: {figure}", changes),
        evidence=[Evidence("#parallel", f"parallel.plans[{index}]", figure)],
        caveats=[f"{plan.devices}× the GPUs; communication between them is not counted",
                 *([plan.note] if plan.note else [])],
        basis=MEASURED if result.basis == BASIS_MEASURED else ESTIMATED,
        serves="devices",
        gain=MAKES_IT_FIT,
    )]  # fmt: skip
