"""Advice scenarios built from real result dataclasses: shares, fits, experiments' results."""

from __future__ import annotations

from typing import Any

from profiling import serde
from profiling.caching.results import CachingResult, PrefixPoint, PromptSampleReuse
from profiling.config import Workload
from profiling.measure import hardware
from profiling.model.shapes import Shapes
from profiling.parallel.results import (
    DisaggregationResult,
    MeasuredTP,
    ParallelResult,
    PlanInputs,
)
from profiling.projection.fit import Footprint, activation_bytes, fit_check
from profiling.quantization.results import (
    MEASURED,
    QUALITY_CONVENTION,
    MethodSettings,
    QuantizationResult,
    QuantVariant,
)
from profiling.results import Samples
from profiling.speculative.results import (
    ACCEPTANCE_CONVENTION,
    DraftMemory,
    SpeculativeResult,
    SweepPoint,
)
from profiling.technique_kit.advice_results import Advice

WORKLOAD = Workload(prompt_tokens=512, output_tokens=128, concurrency=8)


def bandwidth_bound_decode(data: dict[str, Any], shapes: Shapes, rate: float = 2e9) -> None:
    """Decode steps timed as a GPU would take them: bytes read / bandwidth.

    On two shared CPU cores a tiny model's step is overhead and noise, so the
    calibration would otherwise pick a different model of the step run to run.
    """
    dtype = data["environment"]["dtype"]
    for point in data["decode"]:
        seconds = shapes.decode_bytes(dtype, point["batch_size"], point["context_tokens"]) / rate
        point["seconds_per_token"] = serde.to_dict(Samples([seconds] * 3))


def repeats(value: float, spread: float = 0.02) -> Samples:
    """Three repeats around `value` (median exactly `value`), ±`spread` of it."""
    return Samples([value * (1 - spread), value, value * (1 + spread)])


def set_shares(data: dict[str, Any], prefill: float) -> None:
    data["verdict"].update(prefill_share=prefill, decode_share=1 - prefill)


def set_weights(data: dict[str, Any], weights_bytes: int, gpus: int = 1) -> None:
    """Pretend the model's weights are `weights_bytes`; the fit check is redone."""
    workload = Workload(**data["config"]["workload"])
    kv = data["memory"]["kv_cache_bytes_per_token"]
    shapes = Shapes(**data["model"]["shapes"]) if data["model"].get("shapes") else None
    peak = activation_bytes(shapes, data["environment"]["dtype"], gpus)
    fit = fit_check(Footprint(weights_bytes, kv, peak), workload, hardware.lookup("H100"), gpus)
    data["memory"].update(weights_bytes=weights_bytes, fit=serde.to_dict(fit))
    data["config"]["hardware"]["gpu_count"] = gpus


def add_experiment(data: dict[str, Any], name: str, result: Any) -> None:
    data[name] = result.to_dict()
    data["experiments_run"] = sorted({*data["experiments_run"], name})


def quant_variant(
    name: str, weights: int, step_s: float, *, top1: float | None = None,
    ppl: float | None = None, status: str = MEASURED, kept: tuple[str, ...] = (),
) -> QuantVariant:  # fmt: skip
    reference = name == "fp32"
    measured = status == MEASURED
    return QuantVariant(
        name=name,
        precision=name,
        status=status,
        reason="" if measured else "torchao kernel crashed",
        is_reference=reference,
        settings=MethodSettings("torchao", name, 32 if reference else 8, kept_modules=list(kept)),
        weights_bytes=weights if measured else None,
        seconds_per_token=repeats(step_s) if measured else None,
        concurrency=8,
        concurrency_seconds_per_token=repeats(step_s * 2) if measured else None,
        perplexity=ppl,
        top1_agreement=top1,
    )


def quantization_result(*variants: QuantVariant) -> QuantizationResult:
    return QuantizationResult(
        model="demo", config_only=False, quality_meaningful=True,
        quality_convention=QUALITY_CONVENTION, reference="fp32", prompt_set_version=1,
        eval_text_tokens=256, max_new_tokens=16,
        variants=[quant_variant("fp32", 8_000_000, 0.010, ppl=20.0), *variants],
    )  # fmt: skip


def sweep_point(
    speedup: float,
    batch: int = 8,
    k: int = 4,
    matches: bool = True,
    spread: float = 0.02,
    divergence: str = "",
) -> SweepPoint:
    return SweepPoint(
        draft="demo-draft", k=k, batch_size=batch, prompts=8, generated_tokens=256,
        proposed_tokens=256, accepted_tokens=160, corrections=40, bonus_tokens=24,
        target_passes=64, sequence_passes=64, acceptance_rate=0.625,
        mean_accepted_length=3.5, acceptance_by_position=[0.9, 0.7, 0.5, 0.4],
        # The two sides' noise runs opposite ways, as uncorrelated noise can.
        seconds=Samples(repeats(1.0, spread).samples[::-1]),
        baseline_seconds=repeats(speedup, spread),
        tokens_per_second=256 * speedup, baseline_tokens_per_second=256.0, speedup=speedup,
        matches_baseline=matches,
        divergence=divergence or ("" if matches else "real"),
        first_divergence=None if matches else 11, agreement=1.0 if matches else 0.8,
        logit_gap=None if matches else (0.01 if divergence == "numerics" else 4.2),
    )  # fmt: skip


def speculative_result(*sweeps: SweepPoint) -> SpeculativeResult:
    return SpeculativeResult(
        target="demo", config_only=False, acceptance_meaningful=True,
        acceptance_convention=ACCEPTANCE_CONVENTION, max_new_tokens=32, prompt_set_version=1,
        draft_memory=[DraftMemory("demo-draft", "model", 250_000, 1_000_000, 768)],
        sweeps=list(sweeps), best_k=[], verify_cost=[],
    )  # fmt: skip


def prefix_point(cold: float, warm: float, matches: bool = True) -> PrefixPoint:
    return PrefixPoint(
        prompt_tokens=512, prefix_tokens=307, prefix_share=0.6, suffixes=4,
        cold_ttft_seconds=repeats(cold), warm_ttft_seconds=repeats(warm),
        warm_to_cold=warm / cold, prefix_cache_bytes=307 * 3072, outputs_match=matches,
        tokens_match=matches, max_abs_logit_diff=0.0, greedy_tokens=8, label="prompt sample",
    )  # fmt: skip


def caching_result(reuse: float, cold: float = 0.09, warm: float = 0.03, matches: bool = True):
    point = prefix_point(cold, warm, matches)
    sample = PromptSampleReuse(
        prompts=200, total_tokens=100_000, reusable_tokens=int(reuse * 100_000),
        reuse_fraction=reuse, hit_rate=0.95, block_size=16,
        block_reusable_tokens=int(reuse * 99_000), block_reuse_fraction=reuse * 0.99,
        block_hit_rate=0.95, unique_tokens=40_000, mean_prompt_tokens=500.0,
        max_prompt_tokens=700, median_reused_tokens=300.0, shared_prefix_histogram=[],
        cache_bytes_needed=40_000 * 3072, prompt_tokens=512, cold_ttft_seconds=cold,
        warm_ttft_seconds=warm, ttft_saving_fraction=1 - warm / cold, measured=point,
    )  # fmt: skip
    return CachingResult(
        model="demo", config_only=False, prompt_tokens=512, requested_prompt_tokens=512,
        kv_bytes_per_token=3072, prefix_sweep=[point], multi_turn=[], prompt_sample=sample,
    )  # fmt: skip


def disaggregation_result(alone: float, mixed: float, target: float | None) -> DisaggregationResult:
    share = 8 / 128
    return DisaggregationResult(
        decode_batch=8, decode_context_tokens=576, prefill_tokens=512,
        decode_alone_seconds=repeats(alone), decode_mixed_seconds=repeats(mixed),
        prefill_seconds=Samples([mixed - alone]), decode_alone_tpot_seconds=alone,
        decode_mixed_tpot_seconds=mixed, tpot_spike=mixed / alone, mixed_step_share=share,
        mean_tpot_seconds=alone + share * (mixed - alone), tpot_target_seconds=target,
        alone_meets_tpot=None if target is None else alone <= target,
        mixed_meets_tpot=None if target is None else mixed <= target,
        ratio_basis="test", prefill_seconds_per_request=mixed - alone, decode_batch_for_ratio=8,
        decode_seconds_per_request=128 * alone, request_rate_per_second=5.0,
        prefill_requests_per_second_per_worker=20.0, decode_requests_per_second_per_worker=6.0,
        prefill_to_decode_ratio=0.3, prefill_workers=1, decode_workers=3,
        workers="1 prefill : 3 decode", kv_transfer_bytes_per_request=512 * 3072,
        kv_transfer_seconds=0.0001, link="NVLink 4", link_bytes_per_second=450e9,
        ttft_disaggregated_seconds=mixed - alone + 0.0001, ttft_target_seconds=None,
        disaggregated_meets_ttft=None,
    )  # fmt: skip


def parallel_failed() -> ParallelResult:
    inputs = PlanInputs(
        weights_bytes=8_000_000, split_weights_bytes=6_000_000, kv_projection_bytes=500_000,
        vocab_bytes=1_000_000, replicated_bytes=500_000, layers=4, attention_heads=4,
        kv_heads=2, kv_bytes_per_token=3072, kv_split_by_heads=True, vocab_parallel=True,
        concurrency=8, context_tokens=640, gpu_kind="H100-SXM", device_memory_bytes=80e9,
        memory_source="catalog",
    )  # fmt: skip
    measured = MeasuredTP(status="failed", reason="torchrun exited with code 1")
    return ParallelResult("estimated from shapes", inputs, [], None, measured, None)


def techniques(advice: Advice) -> list[str]:
    return [r.technique for r in advice.recommendations]


def refusals(advice: Advice, technique: str) -> list[str]:
    return [n.why for n in advice.not_recommended if n.technique == technique]
