"""The parallel section: per-device memory of TP × PP splits, the measured
tensor-parallel run, and prefill/decode disaggregation.

Built from the raw `result["parallel"]` dict the library writes
(`profiling.parallel.results.ParallelResult.to_dict()`); the disaggregation dict
is also at the top level of the result (`result["disaggregation"]`), used when
the parallel dict lacks it. Reasons, notes and warnings stay plain strings; the
template's autoescape is what makes them safe.
"""

from __future__ import annotations

from typing import Any

from advisor.reports.quantization import median, ratio
from profiling.parallel.results import BASIS_MEASURED
from profiling.units import number_text

MEASURED_LABELS = {
    "measured": "measured",
    "skipped": "not run",
    "failed": "failed",
}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value or [] if isinstance(item, dict)]


def _same_plan(plan: dict[str, Any], other: Any) -> bool:
    return isinstance(other, dict) and (plan.get("tp"), plan.get("pp")) == (
        other.get("tp"),
        other.get("pp"),
    )


def plan_rows(parallel: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per TP × PP split, fewest devices first (TP before PP at the same count);
    the split the library chose as the fewest devices that fit is marked."""
    fewest = parallel.get("fewest_devices")
    rows = [
        {**plan, "is_fewest": _same_plan(plan, fewest), "valid": plan.get("valid") is not False}
        for plan in _dicts(parallel.get("plans"))
    ]
    rows.sort(key=lambda r: (r.get("devices") or 0, r.get("pp") or 0, r.get("tp") or 0))
    return rows


def _timed(mine: Any, single: Any, ratio_value: Any) -> dict[str, Any]:
    """A TP time beside the one-process time, and TP / single as "1.8× slower"."""
    tp_s, single_s = median(mine), median(single)
    return {
        "tp_s": tp_s,
        "single_s": single_s,
        "ratio": ratio_value,
        "ratio_text": ratio(tp_s, single_s, "faster", "slower"),
    }


def measured_context(measured: Any) -> dict[str, Any] | None:
    """The measured tensor-parallel run, or its reason for not being one."""
    if not isinstance(measured, dict):
        return None
    status = str(measured.get("status") or "")
    per_rank = [b for b in measured.get("weights_bytes_per_rank") or [] if isinstance(b, int)]
    single = measured.get("single_weights_bytes")
    return {
        **measured,
        "status_label": MEASURED_LABELS.get(status, status or "unknown"),
        "is_measured": status == "measured",
        "ranks": [
            {"rank": i, "bytes": b, "vs_single": ratio(b, single, "smaller", "larger")}
            for i, b in enumerate(per_rank)
        ],
        "prefill": _timed(
            measured.get("prefill_seconds"),
            measured.get("single_prefill_seconds"),
            measured.get("prefill_ratio"),
        ),
        "decode": _timed(
            measured.get("decode_step_seconds"),
            measured.get("single_decode_step_seconds"),
            measured.get("decode_ratio"),
        ),
        "outputs_match": measured.get("logits_match") is True
        and measured.get("greedy_tokens_match") is True,
        "max_logit_text": number_text(measured.get("max_logit_difference")),
    }


def disaggregation_context(disaggregation: Any) -> dict[str, Any] | None:
    if not isinstance(disaggregation, dict):
        return None
    return {
        **disaggregation,
        "alone_s": median(disaggregation.get("decode_alone_seconds")),
        "mixed_s": median(disaggregation.get("decode_mixed_seconds")),
        "prefill_s": median(disaggregation.get("prefill_seconds")),
    }


def plan_finding(parallel: dict[str, Any], disaggregation: dict[str, Any] | None) -> str:
    """The parallel finding without the disaggregation finding it ends with (shown below)."""
    text = str(parallel.get("finding") or "")
    tail = str((disaggregation or {}).get("finding") or "")
    return text.removesuffix(tail).strip() if tail else text


def section_context(parallel: Any, disaggregation: Any = None) -> dict[str, Any] | None:
    if not isinstance(parallel, dict):
        return None
    disagg = parallel.get("disaggregation")
    disagg = disagg if isinstance(disagg, dict) else disaggregation
    split = disaggregation_context(disagg)
    return {
        "raw": parallel,
        "basis_measured": parallel.get("basis") == BASIS_MEASURED,
        "inputs": parallel.get("inputs") if isinstance(parallel.get("inputs"), dict) else {},
        "plans": plan_rows(parallel),
        "fewest": parallel.get("fewest_devices"),
        "measured": measured_context(parallel.get("measured")),
        "disaggregation": split,
        "finding": plan_finding(parallel, split),
        "notes": [str(n) for n in parallel.get("notes") or []],
        # The library's list already holds the disaggregation warnings.
        "warnings": [str(w) for w in parallel.get("warnings") or []],
    }
