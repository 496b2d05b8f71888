"""Caching and parallel results built with the library's own dataclasses, for the
chart and view tests.

The numbers are made up but shaped like a CPU run of the demo model at 512-token
prompts: warm TTFT falls as more of the prompt is cached, one sample of twelve
prompts reusing 61 % of its tokens, and a two-process gloo tensor-parallel run.
`with_caching` / `with_parallel` place them in a real profile's dict the way
`Profile.to_dict()` does (parallel also writes a top-level `disaggregation`).
"""

from __future__ import annotations

import copy
from typing import Any

from profiling.caching.results import (
    CachingResult,
    PrefixBucket,
    PrefixPoint,
    PromptSampleReuse,
    TurnPoint,
)
from profiling.parallel.results import (
    BASIS_ESTIMATED,
    BASIS_MEASURED,
    DisaggregationResult,
    MeasuredTP,
    ParallelPlan,
    ParallelResult,
    PlanInputs,
)
from profiling.results import Samples

COLD_S = 0.200  # cold TTFT at 512 tokens
SKIPPED_REASON = "not asked (set tp_measure, or --tp-measure 2 on the command line)"
LINK = "NVLink 4"


def samples(median_s: float) -> Samples:
    return Samples([median_s * 0.95, median_s, median_s * 1.05])


def point(prefix: int, warm_s: float, *, label: str = "", match: bool = True) -> PrefixPoint:
    return PrefixPoint(
        prompt_tokens=512, prefix_tokens=prefix, prefix_share=prefix / 512, suffixes=4,
        cold_ttft_seconds=samples(COLD_S), warm_ttft_seconds=samples(warm_s),
        warm_to_cold=warm_s / COLD_S, prefix_cache_bytes=prefix * 3072,
        outputs_match=match, tokens_match=match, max_abs_logit_diff=0.0 if match else 3.5,
        greedy_tokens=8, label=label,
    )  # fmt: skip


def sample_reuse(**changes: Any) -> PromptSampleReuse:
    fields: dict[str, Any] = {
        "prompts": 12, "total_tokens": 736, "reusable_tokens": 452, "reuse_fraction": 0.614,
        "hit_rate": 11 / 12, "block_size": 16, "block_reusable_tokens": 352,
        "block_reuse_fraction": 0.478, "block_hit_rate": 11 / 12, "unique_tokens": 284,
        "mean_prompt_tokens": 61.3, "max_prompt_tokens": 63, "median_reused_tokens": 41.0,
        "shared_prefix_histogram": [
            PrefixBucket(0, 0, 1), PrefixBucket(1, 15, 0), PrefixBucket(16, 63, 11),
            PrefixBucket(4096, None, 0),
        ],
        "cache_bytes_needed": 872_448, "prompt_tokens": 512,
        "cold_ttft_seconds": COLD_S, "warm_ttft_seconds": 0.090,
        "interpolated_warm_ttft_seconds": 0.095, "ttft_saving_fraction": 0.55,
        "measured": point(314, 0.090, label="prompt sample"),
    }  # fmt: skip
    fields.update(changes)
    return PromptSampleReuse(**fields)


def turn(number: int, warm_s: float) -> TurnPoint:
    return TurnPoint(
        turn=number, prompt_tokens=102 + 204 * (number - 1), cached_tokens=204 * (number - 1),
        new_tokens=102, cold_ttft_seconds=samples(0.05 * number),
        warm_ttft_seconds=samples(warm_s), warm_to_cold=warm_s / (0.05 * number),
        cache_bytes=204 * (number - 1) * 3072, outputs_match=True, max_abs_logit_diff=0.0,
    )  # fmt: skip


def caching_result(**changes: Any) -> CachingResult:
    fields: dict[str, Any] = {
        "model": "demo", "config_only": False, "prompt_tokens": 512,
        "requested_prompt_tokens": 512, "kv_bytes_per_token": 3072,
        "prefix_sweep": [
            point(0, 0.200), point(128, 0.160), point(256, 0.110), point(384, 0.070),
            point(461, 0.040),
        ],
        "multi_turn": [turn(1, 0.05), turn(2, 0.04), turn(3, 0.045)],
        "shared_prefix": point(64, 0.180, label="shared prefix"),
        "shared_prefix_requested_tokens": 64, "prefix_cache_tokens": 64,
        "prefix_cache_bytes": 64 * 3072, "prompt_sample": sample_reuse(),
        "finding": "your prompts share 61 % of their tokens; caching cuts TTFT from 200 to "
        "90 ms (measured at 512-token prompts)",
        "warnings": ["prefix 0 tokens cold is noisy"],
    }  # fmt: skip
    fields.update(changes)
    return CachingResult(**fields)


def plan(tp: int, pp: int, *, fits: bool | None, note: str = "") -> ParallelPlan:
    weights, kv = 8_000_000_000 // tp // pp, 4_000_000_000 // tp // pp
    return ParallelPlan(
        tp=tp, pp=pp, devices=tp * pp, valid=True, layers_per_stage=32 // pp,
        kv_heads_per_device=8 // tp, kv_replication=1, weights_bytes_per_device=weights,
        kv_cache_bytes_per_device=kv, bytes_per_device=weights + kv,
        available_bytes_per_device=7_000_000_000, fits=fits, note=note,
    )  # fmt: skip


def measured_tp(**changes: Any) -> MeasuredTP:
    fields: dict[str, Any] = {
        "status": "measured", "tp_size": 2, "backend": "gloo", "device": "cpu",
        "threads_per_rank": 1, "prompt_tokens": 64, "decode_batch": 2,
        "decode_context_tokens": 64, "weights_bytes_per_rank": [4_200_000, 4_200_000],
        "weights_storage_bytes_per_rank": [4_200_000, 4_200_000],
        "single_weights_bytes": 8_068_032, "weights_ratio": 0.52,
        "predicted_weights_bytes_per_rank": 4_200_000,
        "kv_bytes_per_token_per_rank": [1536, 1536], "single_kv_bytes_per_token": 3072,
        "prefill_seconds": samples(0.030), "single_prefill_seconds": samples(0.020),
        "prefill_ratio": 1.5, "decode_step_seconds": samples(0.012),
        "single_decode_step_seconds": samples(0.008), "decode_ratio": 1.5,
        "max_logit_difference": 2e-6, "logits_match": True, "greedy_tokens_match": True,
        "greedy_tokens": 6, "wall_seconds": 41.0,
    }  # fmt: skip
    fields.update(changes)
    return MeasuredTP(**fields)


def disaggregation_result(**changes: Any) -> DisaggregationResult:
    fields: dict[str, Any] = {
        "decode_batch": 4, "decode_context_tokens": 256, "prefill_tokens": 256,
        "decode_alone_seconds": samples(0.020), "decode_mixed_seconds": samples(0.080),
        "prefill_seconds": samples(0.060), "decode_alone_tpot_seconds": 0.020,
        "decode_mixed_tpot_seconds": 0.080, "tpot_spike": 4.0, "mixed_step_share": 0.0625,
        "mean_tpot_seconds": 0.02375, "tpot_target_seconds": 0.050, "alone_meets_tpot": True,
        "mixed_meets_tpot": False, "ratio_basis": "the baseline's verdict",
        "prefill_seconds_per_request": 0.1, "decode_batch_for_ratio": 8,
        "decode_seconds_per_request": 3.0, "request_rate_per_second": 2.58,
        "prefill_requests_per_second_per_worker": 10.0,
        "decode_requests_per_second_per_worker": 2.58, "prefill_to_decode_ratio": 0.333,
        "prefill_workers": 1, "decode_workers": 3, "workers": "1 prefill : 3 decode",
        "kv_transfer_bytes_per_request": 1_572_864, "kv_transfer_seconds": 0.0000087,
        "link": LINK, "link_bytes_per_second": 1.8e11, "ttft_disaggregated_seconds": 0.1000087,
        "ttft_target_seconds": 0.5, "disaggregated_meets_ttft": True,
        "finding": "A prefill of 256 tokens joining a decode step of 4 requests stretches "
        "their token time from 20.0 to 80.0 ms (4.0×).",
        "warnings": ["interference: the mixed step is noisy"],
    }  # fmt: skip
    fields.update(changes)
    return DisaggregationResult(**fields)


def parallel_result(*, measured: MeasuredTP | None = None, **changes: Any) -> ParallelResult:
    measured = measured or measured_tp()
    split = disaggregation_result()
    plans = [
        plan(1, 1, fits=False, note="weights alone exceed the device"),
        plan(2, 1, fits=True), plan(1, 2, fits=True), plan(4, 1, fits=True),
    ]  # fmt: skip
    inputs = PlanInputs(
        weights_bytes=8_000_000_000, split_weights_bytes=6_000_000_000,
        kv_projection_bytes=500_000_000, vocab_bytes=1_400_000_000, replicated_bytes=100_000,
        layers=32, attention_heads=32, kv_heads=8, kv_bytes_per_token=131_072,
        kv_split_by_heads=True, vocab_parallel=True, concurrency=8, context_tokens=4096,
        gpu_kind="L4", device_memory_bytes=24_000_000_000, memory_source="catalog",
    )  # fmt: skip
    fields: dict[str, Any] = {
        "basis": BASIS_MEASURED if measured.status == "measured" else BASIS_ESTIMATED,
        "inputs": inputs, "plans": plans, "fewest_devices": plans[1], "measured": measured,
        "disaggregation": split, "notes": ["norms and buffers are replicated"],
        "finding": "The fewest L4 GPUs that hold 8 requests × 4096 tokens: 2, TP 2 × PP 1. "
        + split.finding,
        "warnings": ["interference: the mixed step is noisy"],
    }  # fmt: skip
    fields.update(changes)
    return ParallelResult(**fields)


def with_caching(result: dict[str, Any], caching: CachingResult) -> dict[str, Any]:
    """`result` (a `Profile.to_dict()`) with the caching experiment added to it."""
    result["caching"] = caching.to_dict()
    result["experiments_run"] = sorted({*result.get("experiments_run", []), "caching"})
    return result


def with_parallel(result: dict[str, Any], parallel: ParallelResult) -> dict[str, Any]:
    """`result` with the parallel experiment and its top-level `disaggregation` copy."""
    data = parallel.to_dict()
    result["parallel"] = data
    names = {*result.get("experiments_run", []), "parallel"}
    if data.get("disaggregation") is not None:
        result["disaggregation"] = copy.deepcopy(data["disaggregation"])
        names.add("disaggregation")
    result["experiments_run"] = sorted(names)
    return result
