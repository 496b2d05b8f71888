"""The parallel section: per-device memory of TP × PP splits, the measured
tensor-parallel run, and prefill/decode disaggregation.

Built from the typed `ParallelResult` of the profile; the disaggregation result
is also kept beside it (`profile.experiments.disaggregation`), used when the
parallel result lacks it. Reasons, notes and warnings stay plain strings; the
template's autoescape is what makes them safe.
"""

from __future__ import annotations

from typing import Any

from advisor.reports.quantization import median
from profiling.parallel.results import (
    BASIS_MEASURED,
    DisaggregationResult,
    MeasuredTP,
    ParallelPlan,
    ParallelResult,
)
from profiling.results import Samples
from profiling.units import number_text, ratio

MEASURED_LABELS = {
    "measured": "measured",
    "skipped": "not run",
    "failed": "failed",
}


def _same_plan(plan: ParallelPlan, other: ParallelPlan | None) -> bool:
    return other is not None and (plan.tp, plan.pp) == (other.tp, other.pp)


def plan_rows(parallel: ParallelResult) -> list[dict[str, Any]]:
    """One row per TP × PP split, fewest devices first (TP before PP at the same count);
    the split the library chose as the fewest devices that fit is marked."""
    fewest = parallel.fewest_devices
    rows = [{**vars(plan), "is_fewest": _same_plan(plan, fewest)} for plan in parallel.plans]
    rows.sort(key=lambda r: (r["devices"], r["pp"], r["tp"]))
    return rows


def _timed(mine: Samples | None, single: Samples | None, ratio_value: float | None) -> dict:
    """A TP time beside the one-process time, and TP / single as "1.8× slower"."""
    tp_s, single_s = median(mine), median(single)
    return {
        "tp_s": tp_s,
        "single_s": single_s,
        "ratio": ratio_value,
        "ratio_text": ratio(tp_s, single_s, "faster", "slower"),
    }


def measured_context(measured: MeasuredTP) -> dict[str, Any]:
    """The measured tensor-parallel run, or its reason for not being one."""
    single = measured.single_weights_bytes
    return {
        **vars(measured),
        "status_label": MEASURED_LABELS.get(measured.status, measured.status or "unknown"),
        "is_measured": measured.status == "measured",
        "ranks": [
            {"rank": i, "bytes": b, "vs_single": ratio(b, single, "smaller", "larger")}
            for i, b in enumerate(measured.weights_bytes_per_rank)
        ],
        "prefill": _timed(
            measured.prefill_seconds, measured.single_prefill_seconds, measured.prefill_ratio
        ),
        "decode": _timed(
            measured.decode_step_seconds,
            measured.single_decode_step_seconds,
            measured.decode_ratio,
        ),
        "outputs_match": measured.logits_match is True and measured.greedy_tokens_match is True,
        "max_logit_text": number_text(measured.max_logit_difference),
    }


def disaggregation_context(disaggregation: DisaggregationResult | None) -> dict[str, Any] | None:
    if disaggregation is None:
        return None
    return {
        **vars(disaggregation),
        "alone_s": median(disaggregation.decode_alone_seconds),
        "mixed_s": median(disaggregation.decode_mixed_seconds),
        "prefill_s": median(disaggregation.prefill_seconds),
    }


def plan_finding(parallel: ParallelResult, disaggregation: DisaggregationResult | None) -> str:
    """The parallel finding without the disaggregation finding it ends with (shown below)."""
    tail = disaggregation.finding if disaggregation else ""
    return parallel.finding.removesuffix(tail).strip() if tail else parallel.finding


def section_context(
    parallel: ParallelResult | None, disaggregation: DisaggregationResult | None = None
) -> dict[str, Any] | None:
    if parallel is None:
        return None
    split = parallel.disaggregation or disaggregation
    return {
        "raw": parallel,
        "basis_measured": parallel.basis == BASIS_MEASURED,
        "inputs": parallel.inputs,
        "plans": plan_rows(parallel),
        "fewest": parallel.fewest_devices,
        "measured": measured_context(parallel.measured),
        "disaggregation": disaggregation_context(split),
        "finding": plan_finding(parallel, split),
        "notes": list(parallel.notes),
        # The library's list already holds the disaggregation warnings.
        "warnings": list(parallel.warnings),
    }
