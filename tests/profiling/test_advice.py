"""The advice, scenario by scenario: a real quick profile of `demo` turned into workloads.

One real profile is measured per module; each scenario copies its JSON and
changes the workload, the fit or the experiments' results (built from the
real result dataclasses), then checks which bottleneck is named, which
technique comes first, and which are refused with their measured reason.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from profiling import cli, hardware, memory, serde
from profiling.advice.build import advise_profile
from profiling.advice.quality import MAX_PERPLEXITY_INCREASE, MIN_TOP1_AGREEMENT
from profiling.advice.results import Advice, PredictionPoint
from profiling.caching.results import CachingResult, PrefixPoint, PromptSampleReuse
from profiling.config import Hardware, ProfileConfig, Workload
from profiling.parallel.results import (
    DisaggregationResult,
    MeasuredTP,
    ParallelResult,
    PlanInputs,
)
from profiling.quantization.results import (
    FAILED,
    MEASURED,
    QUALITY_CONVENTION,
    MethodSettings,
    QuantizationResult,
    QuantVariant,
)
from profiling.results import Profile, Samples
from profiling.shapes import Shapes
from profiling.speculative.results import (
    ACCEPTANCE_CONVENTION,
    DraftMemory,
    SpeculativeResult,
    SweepPoint,
)

WORKLOAD = Workload(prompt_tokens=512, output_tokens=128, concurrency=8)


@pytest.fixture(scope="module")
def real(one_torch_thread: None) -> Profile:
    from profiling.runner import run_profile

    config = ProfileConfig(
        model="demo", device="cpu", quick=True, workload=WORKLOAD,
        hardware=Hardware(gpu_kind="H100-SXM"),
    )  # fmt: skip
    return run_profile(config)


@pytest.fixture(scope="module")
def shapes() -> Shapes:
    from profiling.demo import ensure_demo

    return Shapes.from_config(json.loads((ensure_demo("demo") / "config.json").read_text()))


@pytest.fixture
def base(real: Profile, shapes: Shapes) -> dict[str, Any]:
    """The real profile's JSON, decode-dominated and bandwidth-bound, with no experiments."""
    data = copy.deepcopy(real.to_dict())
    _shares(data, prefill=0.1)
    _bandwidth_bound_decode(data, shapes)
    return data


# -- scenario builders ------------------------------------------------------------


def _bandwidth_bound_decode(data: dict[str, Any], shapes: Shapes, rate: float = 2e9) -> None:
    """Decode steps timed as a GPU would take them: bytes read / bandwidth.

    On two shared CPU cores a tiny model's step is overhead and noise, so the
    calibration would otherwise pick a different model of the step run to run.
    """
    dtype = data["environment"]["dtype"]
    for point in data["decode"]:
        seconds = shapes.decode_bytes(dtype, point["batch_size"], point["context_tokens"]) / rate
        point["seconds_per_token"] = serde.to_dict(Samples([seconds] * 3))


def _shares(data: dict[str, Any], prefill: float) -> None:
    data["verdict"].update(prefill_share=prefill, decode_share=1 - prefill)


def _weights(data: dict[str, Any], weights_bytes: int, gpus: int = 1) -> None:
    """Pretend the model's weights are `weights_bytes`; the fit check is redone."""
    workload = Workload(**data["config"]["workload"])
    kv = data["memory"]["kv_cache_bytes_per_token"]
    fit = memory.fit_check(weights_bytes, kv, workload, hardware.lookup("H100"), gpus)
    data["memory"].update(weights_bytes=weights_bytes, fit=serde.to_dict(fit))
    data["config"]["hardware"]["gpu_count"] = gpus


def _add(data: dict[str, Any], name: str, result: Any) -> None:
    data[name] = result.to_dict()
    data["experiments_run"] = sorted({*data["experiments_run"], name})


def _variant(
    name: str, weights: int, step_s: float, *, top1: float | None = None,
    ppl: float | None = None, status: str = MEASURED, kept: tuple[str, ...] = (),
) -> QuantVariant:  # fmt: skip
    reference = name == "fp32"
    measured = status == MEASURED
    return QuantVariant(
        name=name + (" · lm_head kept" if kept else ""),
        precision=name,
        status=status,
        reason="" if measured else "torchao kernel crashed",
        is_reference=reference,
        settings=MethodSettings("torchao", name, 32 if reference else 8, kept_modules=list(kept)),
        weights_bytes=weights if measured else None,
        seconds_per_token=Samples([step_s]) if measured else None,
        concurrency=8,
        concurrency_seconds_per_token=Samples([step_s * 2]) if measured else None,
        perplexity=ppl,
        top1_agreement=top1,
    )


def _quantization(*variants: QuantVariant) -> QuantizationResult:
    return QuantizationResult(
        model="demo", config_only=False, quality_meaningful=True,
        quality_convention=QUALITY_CONVENTION, reference="fp32", prompt_set_version=1,
        eval_text_tokens=256, max_new_tokens=16,
        variants=[_variant("fp32", 8_000_000, 0.010, ppl=20.0), *variants],
    )  # fmt: skip


def _sweep(speedup: float, batch: int = 8, k: int = 4, matches: bool = True) -> SweepPoint:
    return SweepPoint(
        draft="demo-draft", k=k, batch_size=batch, prompts=8, generated_tokens=256,
        proposed_tokens=256, accepted_tokens=160, corrections=40, bonus_tokens=24,
        target_passes=64, sequence_passes=64, acceptance_rate=0.625,
        mean_accepted_length=3.5, acceptance_by_position=[0.9, 0.7, 0.5, 0.4],
        seconds=Samples([1.0]), baseline_seconds=Samples([speedup]),
        tokens_per_second=256 * speedup, baseline_tokens_per_second=256.0, speedup=speedup,
        matches_baseline=matches,
    )  # fmt: skip


def _speculative(*sweeps: SweepPoint) -> SpeculativeResult:
    return SpeculativeResult(
        target="demo", config_only=False, acceptance_meaningful=True,
        acceptance_convention=ACCEPTANCE_CONVENTION, max_new_tokens=32, prompt_set_version=1,
        draft_memory=[DraftMemory("demo-draft", "model", 250_000, 1_000_000, 768)],
        sweeps=list(sweeps), best_k=[], verify_cost=[],
    )  # fmt: skip


def _prefix_point(cold: float, warm: float, matches: bool = True) -> PrefixPoint:
    return PrefixPoint(
        prompt_tokens=512, prefix_tokens=307, prefix_share=0.6, suffixes=4,
        cold_ttft_seconds=Samples([cold]), warm_ttft_seconds=Samples([warm]),
        warm_to_cold=warm / cold, prefix_cache_bytes=307 * 3072, outputs_match=matches,
        tokens_match=matches, max_abs_logit_diff=0.0, greedy_tokens=8, label="prompt sample",
    )  # fmt: skip


def _caching(reuse: float, cold: float = 0.09, warm: float = 0.03, matches: bool = True):
    point = _prefix_point(cold, warm, matches)
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


def _disaggregation(alone: float, mixed: float, target: float | None) -> DisaggregationResult:
    share = 8 / 128
    return DisaggregationResult(
        decode_batch=8, decode_context_tokens=576, prefill_tokens=512,
        decode_alone_seconds=Samples([alone]), decode_mixed_seconds=Samples([mixed]),
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


def _parallel_failed() -> ParallelResult:
    inputs = PlanInputs(
        weights_bytes=8_000_000, split_weights_bytes=6_000_000, kv_projection_bytes=500_000,
        vocab_bytes=1_000_000, replicated_bytes=500_000, layers=4, attention_heads=4,
        kv_heads=2, kv_bytes_per_token=3072, kv_split_by_heads=True, vocab_parallel=True,
        concurrency=8, context_tokens=640, gpu_kind="H100-SXM", device_memory_bytes=80e9,
        memory_source="catalog",
    )  # fmt: skip
    measured = MeasuredTP(status="failed", reason="torchrun exited with code 1")
    return ParallelResult("estimated from shapes", inputs, [], None, measured, None)


def _techniques(advice: Advice) -> list[str]:
    return [r.technique for r in advice.recommendations]


def _refused(advice: Advice, technique: str) -> list[str]:
    return [n.why for n in advice.not_recommended if n.technique == technique]


# -- one scenario per bottleneck --------------------------------------------------


def test_decode_dominated_demo_is_generation_and_names_the_missing_experiments(
    base: dict[str, Any], shapes: Shapes
) -> None:
    advice = advise_profile(base, shapes)
    assert advice.bottleneck == "generation" and advice.basis == "measured"
    names = {n.name: n for n in advice.deciding_numbers}
    assert names["decode_share"].value == pytest.approx(0.9)
    # Decode at concurrency 8 is far below the H100's ridge point: bandwidth-bound.
    assert names["decode_flops_per_byte"].value < names["decode_flops_per_byte"].threshold
    first = advice.recommendations[0]
    assert first.technique == "quantization" and first.basis == "estimated"
    missing = {m.technique: m.judged for m in advice.experiments_missing}
    assert missing["speculative"] == "not judged" and missing["quantization"] == "estimated"
    assert set(missing) == {"quantization", "speculative", "caching", "parallel", "disaggregation"}


def test_weights_that_fit_only_quantized_are_a_memory_bottleneck_quantization_first(
    base: dict[str, Any], shapes: Shapes
) -> None:
    _weights(base, 100_000_000_000)  # fp32 100 GB: int8 would be 25 GB
    _add(
        base, "quantization", _quantization(_variant("int8", 2_100_000, 0.012, top1=0.99, ppl=20.1))
    )
    advice = advise_profile(base, shapes)
    assert advice.bottleneck == "memory"
    first = advice.recommendations[0]
    assert first.technique == "quantization" and first.basis == "measured"
    assert first.evidence[0].key == "quantization.variants[1]"
    weights = next(c for c in first.expected_effect.changes if c.metric == "weights_bytes")
    assert weights.after < 0.3 * weights.before
    # The measured slowdown and quality are caveats, not hidden.
    assert any("top-1 agreement 99%" in c for c in first.caveats)
    assert any("slower" in c for c in first.caveats)


def test_weights_too_large_even_quantized_need_devices_parallel_first(
    base: dict[str, Any], shapes: Shapes
) -> None:
    _weights(base, 400_000_000_000)  # int8 would still be 100 GB on one 80 GB H100
    advice = advise_profile(base, shapes)
    assert advice.bottleneck == "devices"
    first = advice.recommendations[0]
    assert first.technique == "parallel" and first.setting.startswith("TP=")
    assert "H100" in first.setting and first.basis == "estimated"


def test_repeated_prompts_make_prompt_work_the_bottleneck_caching_first(
    base: dict[str, Any], shapes: Shapes
) -> None:
    _shares(base, prefill=0.35)
    _add(base, "caching", _caching(reuse=0.6))
    advice = advise_profile(base, shapes)
    assert advice.bottleneck == "prompt"
    first = advice.recommendations[0]
    assert first.technique == "caching" and first.basis == "measured"
    assert first.gain == pytest.approx(3.0)
    assert first.evidence[0].key == "caching.prompt_sample"
    assert "60%" in first.setting


# -- which technique comes first --------------------------------------------------


def test_a_measured_speculative_speedup_beats_a_smaller_quantization_gain(
    base: dict[str, Any], shapes: Shapes
) -> None:
    int8 = _variant("int8", 2_100_000, 0.008, top1=0.99, ppl=20.1)  # 1.25× faster
    _add(base, "quantization", _quantization(int8))
    _add(base, "speculative", _speculative(_sweep(2.2), _sweep(1.6, k=2)))
    advice = advise_profile(base, shapes)
    assert _techniques(advice)[:2] == ["speculative", "quantization"]
    first = advice.recommendations[0]
    assert first.setting == "draft demo-draft with K=4" and first.gain == pytest.approx(2.2)
    tpot = next(c for c in first.expected_effect.changes if c.metric == "tpot_ms")
    assert tpot.after == pytest.approx(tpot.before / 2.2)


def test_prefills_stalling_decode_past_the_tpot_target_put_disaggregation_first(
    base: dict[str, Any], shapes: Shapes
) -> None:
    base["config"]["workload"]["tpot_ms"] = 20.0
    _add(base, "speculative", _speculative(_sweep(1.3)))
    _add(base, "disaggregation", _disaggregation(alone=0.010, mixed=0.050, target=0.020))
    advice = advise_profile(base, shapes)
    first = advice.recommendations[0]
    assert first.technique == "disaggregation" and first.setting.endswith("1 prefill : 3 decode")
    assert first.gain == pytest.approx(5.0)


# -- what must not be recommended -------------------------------------------------


def test_speculative_slower_at_the_users_concurrency_is_refused(
    base: dict[str, Any], shapes: Shapes
) -> None:
    # Faster at batch 1, slower at batch 8 (the user's concurrency): refused.
    _add(base, "speculative", _speculative(_sweep(2.0, batch=1), _sweep(0.8, batch=8)))
    advice = advise_profile(base, shapes)
    assert "speculative" not in _techniques(advice)
    (why,) = _refused(advice, "speculative")
    assert "0.80×" in why and "batch 8" in why


def test_a_variant_outside_the_quality_tolerance_is_refused_with_its_figure(
    base: dict[str, Any], shapes: Shapes
) -> None:
    low_agreement = _variant("int4", 1_200_000, 0.004, top1=MIN_TOP1_AGREEMENT - 0.15, ppl=20.2)
    high_perplexity = _variant("int8-dynamic", 2_100_000, 0.004, top1=0.99,
                               ppl=20.0 * (1 + 2 * MAX_PERPLEXITY_INCREASE))  # fmt: skip
    good = _variant("int8", 2_100_000, 0.005, top1=0.99, ppl=20.1, kept=("lm_head",))
    _add(base, "quantization", _quantization(low_agreement, high_perplexity, good))
    advice = advise_profile(base, shapes)
    first = advice.recommendations[0]
    assert first.technique == "quantization"
    assert first.setting == "int8 weight-only (torchao), keep lm_head in fp32"
    refused = _refused(advice, "quantization")
    assert any(w.startswith("int4: top-1 agreement 80.0%") for w in refused)
    assert any(w.startswith("int8-dynamic: perplexity rose +10.0%") for w in refused)


def test_failed_measurements_are_never_recommended(base: dict[str, Any], shapes: Shapes) -> None:
    _weights(base, 100_000_000_000)  # quantization and parallel would both help
    _add(base, "quantization", _quantization(_variant("int8", 0, 0.0, status=FAILED)))
    _add(base, "caching", _caching(reuse=0.6, matches=False))
    _add(base, "parallel", _parallel_failed())
    _add(base, "speculative", _speculative(_sweep(2.0, matches=False)))
    advice = advise_profile(base, shapes)
    assert advice.recommendations == []
    assert "torchao kernel crashed" in _refused(advice, "quantization")[0]
    assert "differed" in _refused(advice, "caching")[0]
    assert "torchrun exited" in _refused(advice, "parallel")[0]
    assert "failed run" in _refused(advice, "speculative")[0]


def test_a_stated_bottleneck_is_checked_against_the_figures(
    base: dict[str, Any], shapes: Shapes
) -> None:
    base["config"]["stated_bottleneck"] = "prompt"
    advice = advise_profile(base, shapes)
    assert advice.agrees is False and "prefill is only 10%" in advice.agreement_note
    base["config"]["stated_bottleneck"] = "generation"
    assert advise_profile(base, shapes).agrees is True
    base["config"]["stated_bottleneck"] = "unsure"
    assert advise_profile(base, shapes).agrees is None


# -- attached to a real profile, and round trips ---------------------------------


def test_the_runner_attaches_advice_and_predictions_that_round_trip(real: Profile) -> None:
    data = json.loads(json.dumps(real.to_dict()))
    assert data["advice"]["bottleneck"] in ("generation", "prompt")
    advice = data["advice"]
    # What the noisy CPU timings make of each technique varies; each is judged either way.
    judged = [r["technique"] for r in advice["recommendations"]]
    judged += [n["technique"] for n in advice["not_recommended"]]
    judged += [m["technique"] for m in advice["experiments_missing"]]
    assert {"quantization", "speculative", "caching", "parallel"} <= set(judged)
    assert all(r["basis"] in ("measured", "estimated") for r in advice["recommendations"])
    bases = {p["basis"] for p in data["predictions"]}
    assert bases == {"calibrated", "estimated", "projected"}
    loo = [p for p in data["predictions"] if p["basis"] == "calibrated"]
    assert len(loo) == len(data["prefill"]) + len(data["decode"])
    assert all(p["measured"] and p["error"] is not None for p in loo)
    weights = next(p for p in data["predictions"] if p["metric"] == "weights_bytes")
    assert abs(weights["error"]) < 0.01  # shapes against the loaded tensors
    assert Profile.from_dict(data) == real
    advice = Advice.from_dict(data["advice"])
    assert advice.to_dict() == data["advice"]
    point = PredictionPoint.from_dict(data["predictions"][0])
    assert point.to_dict() == data["predictions"][0]


def test_a_result_written_before_the_advice_still_reads(real: Profile) -> None:
    old = real.to_dict()
    del old["advice"], old["predictions"]
    profile = Profile.from_dict(old)
    assert profile.advice is None and profile.predictions is None
    assert profile.schema_version == real.schema_version


# -- the estimate command ---------------------------------------------------------


def _estimate(tmp_path: Any, *args: str) -> dict[str, Any]:
    out = tmp_path / "est.json"
    assert cli.main(["estimate", *args, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_estimate_writes_advice_and_predictions_marked_estimated(tmp_path: Any) -> None:
    report = _estimate(tmp_path, "llama-3.1-8b", "--gpu", "H100", "--concurrency", "16")
    assert report["advice"]["basis"] == "estimated"
    assert {r["basis"] for r in report["advice"]["recommendations"]} == {"estimated"}
    assert {p["basis"] for p in report["predictions"]} == {"estimated"}
    assert all(p["measured"] is None for p in report["predictions"])
    assert report["advice"]["bottleneck"] == "generation"
    assert report["workload"]["concurrency"] == 16 and report["dtype"] == "bfloat16"


def test_estimate_of_70b_flips_from_devices_on_one_h100_to_fitting_on_four(
    tmp_path: Any,
) -> None:
    one = _estimate(tmp_path, "llama-3.1-70b", "--gpu", "H100", "--gpus", "1")
    four = _estimate(tmp_path, "llama-3.1-70b", "--gpu", "H100", "--gpus", "4")
    assert one["advice"]["bottleneck"] == "devices"
    assert one["advice"]["recommendations"][0]["technique"] == "parallel"
    assert four["advice"]["bottleneck"] != "devices"
    share = {n["name"]: n["value"] for n in four["advice"]["deciding_numbers"]}
    assert share["memory_headroom_share"] > 0


def test_estimate_reads_a_config_path_and_refuses_unknown_models_and_gpus(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from profiling.estimate import shipped_configs

    (tmp_path / "config.json").write_text(json.dumps(shipped_configs()["llama-3.1-8b"]))
    report = _estimate(tmp_path, str(tmp_path), "--gpu", "A100-80GB")
    assert report["model"]["source"].endswith("config.json")
    assert cli.main(["estimate", "no-such-model", "--gpu", "H100"]) == 2
    assert "unknown model" in capsys.readouterr().err
    assert cli.main(["estimate", "llama-3.1-8b", "--gpu", "Z80"]) == 2
    assert "unknown GPU" in capsys.readouterr().err


def test_profile_and_estimate_share_the_workload_flags() -> None:
    parser = cli.build_parser()
    flags = ["--concurrency", "16", "--prompt-tokens", "1024", "--gpu", "h100", "--ttft-ms", "200"]
    profile = parser.parse_args(["profile", "demo", *flags])
    estimate = parser.parse_args(["estimate", "llama-3.1-8b", *flags])
    assert cli.workload_from_args(profile) == cli.workload_from_args(estimate)
