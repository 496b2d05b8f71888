"""The analytic estimate: shapes against real models, the fit, calibration on `demo`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from profiling.baseline.plan import make_plan
from profiling.config import Workload
from profiling.measure import hardware
from profiling.model.shapes import Shapes
from profiling.projection.calibration import (
    ASSUMED_BANDWIDTH_EFFICIENCY,
    ASSUMED_COMPUTE_EFFICIENCY,
    ASSUMED_LAYER_SECONDS,
    ASSUMED_PASS_SECONDS,
    CALIBRATED,
    ESTIMATED,
    REFERENCE_COMPUTE_SHARE,
    SUSTAINED_COMPUTE_SHARE,
    Calibration,
    PhaseRate,
    assumed,
    calibrate,
    fit_rates,
    leave_one_out,
    median_abs_error,
)
from profiling.projection.estimate import (
    Deployment,
    Traffic,
    allreduce_seconds,
    project,
    shipped_configs,
)
from profiling.results import DecodePoint, Environment, PrefillPoint, Samples
from tests.profiling.tiny import tiny_llama_config


def _real_param_count(config: object) -> int:
    from transformers import AutoModelForCausalLM

    return sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())


@pytest.mark.parametrize("tied", [False, True])
def test_shapes_count_the_parameters_of_a_real_gqa_llama(tied: bool) -> None:
    config = tiny_llama_config(tie_word_embeddings=tied)
    shapes = Shapes.from_config(config.to_dict())
    assert shapes.total_params == _real_param_count(config)


def test_shapes_count_the_parameters_of_a_real_mixture_of_experts() -> None:
    from transformers import MixtralConfig

    config = MixtralConfig(
        hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=128, num_local_experts=4, num_experts_per_tok=2,
    )  # fmt: skip
    shapes = Shapes.from_config(config.to_dict())
    assert shapes.total_params == _real_param_count(config)
    # A token passes through 2 of the 4 experts' MLPs.
    expert_mlp = 3 * 32 * 48
    assert shapes.body_params - shapes.active_body_params == 2 * 2 * expert_mlp


def test_kv_bytes_per_token_agree_with_the_librarys_own_count() -> None:
    from profiling.model.memory import kv_bytes_per_token_computed

    config = tiny_llama_config()
    shapes = Shapes.from_config(config.to_dict())
    assert shapes.kv_bytes_per_token("float32") == kv_bytes_per_token_computed(config, 4)


def test_shipped_configs_have_their_published_sizes() -> None:
    configs = shipped_configs()
    sizes = {name: Shapes.from_config(c).total_params / 1e9 for name, c in configs.items()}
    assert sizes["llama-3.1-8b"] == pytest.approx(8.03, abs=0.01)
    assert sizes["llama-3.1-70b"] == pytest.approx(70.55, abs=0.01)
    assert sizes["mixtral-8x7b"] == pytest.approx(46.70, abs=0.01)


def test_the_fit_recovers_a_compute_bound_line_with_overhead() -> None:
    points = [(f, 1e3, 0.002 + f / 1e9) for f in (1e6, 4e6, 9e6)]
    rate = fit_rates(points)
    assert rate.flops_per_second == pytest.approx(1e9) and rate.bytes_per_second is None
    assert rate.overhead_seconds == pytest.approx(0.002)


def test_the_fit_recovers_a_memory_bound_phase_and_never_goes_negative() -> None:
    # Bytes explain the time; FLOPs vary independently and must get no weight.
    points = [(f, b, b / 2e9) for f, b in ((5e6, 1e6), (1e6, 3e6), (3e6, 8e6), (2e6, 5e6))]
    rate = fit_rates(points)
    assert rate.bytes_per_second == pytest.approx(2e9) and rate.flops_per_second is None
    # Time falling as work grows (noise) must not give a negative rate or overhead.
    odd = fit_rates([(1e6, 1e6, 0.01), (2e6, 2e6, 0.005)])
    assert odd.overhead_seconds >= 0
    assert all(r is None or r > 0 for r in (odd.flops_per_second, odd.bytes_per_second))


def test_one_point_gives_a_line_through_the_origin() -> None:
    rate = fit_rates([(2e6, 1e3, 0.004)])
    assert rate.seconds(2e6, 1e3) == pytest.approx(0.004) and rate.overhead_seconds == 0


def test_assumed_rates_are_marked_as_an_estimate() -> None:
    h100 = hardware.lookup("H100")
    rates = assumed(h100, "bfloat16")
    assert rates.basis == ESTIMATED and "assumed" in rates.note
    assert rates.decode.bytes_per_second < h100.memory_bandwidth_bytes_per_second
    assert rates.prefill.flops_per_second < h100.bf16_flops_per_second


def test_a_gpu_with_a_published_sustained_compute_share_gets_it_and_says_so() -> None:
    # MI300X sustains about half of what NVIDIA's parts do of their peaks: its assumed
    # compute rate is scaled down, its bandwidth (near the others' share) is not.
    mi300x = hardware.lookup("MI300X")
    rates = assumed(mi300x, "bfloat16")
    share = SUSTAINED_COMPUTE_SHARE["MI300X"] / REFERENCE_COMPUTE_SHARE
    peak = mi300x.bf16_flops_per_second
    assert rates.prefill.flops_per_second == pytest.approx(
        peak * ASSUMED_COMPUTE_EFFICIENCY * share
    )
    assert rates.decode.bytes_per_second == pytest.approx(
        mi300x.memory_bandwidth_bytes_per_second * ASSUMED_BANDWIDTH_EFFICIENCY
    )
    assert "sustained" in rates.note
    h100 = assumed(hardware.lookup("H100"), "bfloat16")
    assert h100.prefill.flops_per_second == pytest.approx(
        hardware.lookup("H100").bf16_flops_per_second * ASSUMED_COMPUTE_EFFICIENCY
    )
    assert "sustained" not in h100.note


def test_projection_of_llama_8b_on_h100_is_memory_bound_decode_and_splits_over_gpus() -> None:
    shapes = Shapes.from_config(shipped_configs()["llama-3.1-8b"])
    h100 = hardware.lookup("H100")
    rates = assumed(h100, "bfloat16")
    one = project(shapes, rates, "bfloat16", Traffic(2048, 256, 16), Deployment(h100, 1))
    # A decode step reads ~16 GB of weights + KV: tens of milliseconds at ~2.5 TB/s.
    assert 0.005 < one.tpot_seconds < 0.02
    assert one.fits and one.prefill_share < 0.5
    two = project(shapes, rates, "bfloat16", Traffic(2048, 256, 16), Deployment(h100, 2))
    per_pass = rates.decode.overhead_seconds  # not split: each device pays it every step
    comm = allreduce_seconds(shapes, 16, 2, h100)  # and the all-reduces come on top
    # One decode step at batch = concurrency, the static figure the simulation is built on.
    assert two.step_seconds == pytest.approx(per_pass + (one.step_seconds - per_pass) / 2 + comm)
    assert one.step_seconds <= one.tpot_seconds  # served, prompts join some of the steps
    assert two.tpot_seconds < one.tpot_seconds
    assert any("64 ring all-reduces per pass over NVLink 4" in note for note in two.notes)
    crowded = project(shapes, rates, "bfloat16", Traffic(32_768, 1024, 512), Deployment(h100, 1))
    assert crowded.fits is False


def test_no_projection_is_faster_than_a_pass_can_be(demo_model_dir: Path) -> None:
    # A 2-layer demo model on an H100: the roofline alone says microseconds per pass.
    shapes = Shapes.from_config(json.loads((demo_model_dir / "config.json").read_text()))
    h100 = hardware.lookup("H100")
    rates = assumed(h100, "bfloat16", shapes.num_layers)
    tiny = project(shapes, rates, "bfloat16", Traffic(16, 8, 1), Deployment(h100, 1))
    floor = ASSUMED_PASS_SECONDS + shapes.num_layers * ASSUMED_LAYER_SECONDS
    assert tiny.ttft_seconds >= floor and tiny.tpot_seconds >= floor
    assert tiny.decode_tokens_per_second <= 1 / floor
    assert f"{floor * 1e3:.2f} ms per pass" in rates.note


def test_a_calibration_never_projects_below_the_fastest_measured_pass() -> None:
    rate = fit_rates([(1e9, 1e6, 0.010), (2e9, 2e6, 0.020), (4e9, 4e6, 0.040)])
    assert rate.floor_seconds == pytest.approx(0.010)
    assert rate.seconds(1e3, 1e3) == pytest.approx(0.010)  # far less work than measured
    assert rate.seconds(8e9, 8e6) == pytest.approx(0.080, rel=1e-6)


def test_tensor_parallelism_pays_its_all_reduces_so_eight_gpus_are_not_eight_times_faster():
    shapes = Shapes.from_config(shipped_configs()["llama-3.1-8b"])
    h100, pcie = hardware.lookup("H100"), hardware.lookup("H100-PCIE")
    rates = assumed(h100, "bfloat16", shapes.num_layers)
    one = project(shapes, rates, "bfloat16", Traffic(512, 128, 16), Deployment(h100, 1))
    eight = project(shapes, rates, "bfloat16", Traffic(512, 128, 16), Deployment(h100, 8))
    assert 2 < one.tpot_seconds / eight.tpot_seconds < 6
    # A ring over 8 devices moves 2·7/8 of each step's activations over every link.
    size = 16 * shapes.hidden_size * 2
    per_call = 2 * 7 / 8 * size / h100.interconnect_bytes_per_second + 10e-6
    assert allreduce_seconds(shapes, 16, 8, h100) == pytest.approx(64 * per_call)
    # Prefill moves a whole prompt's activations: over PCIe it costs far more.
    assert allreduce_seconds(shapes, 4096, 8, pcie) > 5 * allreduce_seconds(shapes, 4096, 8, h100)


def test_calibration_round_trips_through_its_dict() -> None:
    calibration = Calibration(
        CALIBRATED, "cpu", PhaseRate(1e9, None, 0.001, 3), PhaseRate(None, 2e9, 0.0, 4)
    )
    assert Calibration.from_dict(calibration.to_dict()) == calibration


# The known rates the synthetic timings follow.
PREFILL_OVERHEAD_S, PREFILL_FLOPS_PER_S, DECODE_BYTES_PER_S = 0.5e-3, 2e10, 2e9


@dataclass
class Measurements:
    """What a calibration reads of a profile (`calibration.Measured`)."""

    environment: Environment
    prefill: list[PrefillPoint]
    decode: list[DecodePoint]


def known_rates(shapes: Shapes, workload: Workload, max_positions: int) -> Measurements:
    """The full sweep's points on `demo`, timed by known rates instead of a clock: prefill
    compute-bound (0.5 ms per pass + FLOPs at 20 GFLOP/s), decode bandwidth-bound (bytes
    read at 2 GB/s, as `advice_scenarios.bandwidth_bound_decode` writes them)."""
    plan = make_plan(workload, quick=False, max_positions=max_positions)
    dtype = "float32"
    prefill = []
    for tokens in plan.prefill_tokens:
        for batch in plan.prefill_batches:
            flops = shapes.prefill_flops(tokens, batch)
            seconds = PREFILL_OVERHEAD_S + flops / PREFILL_FLOPS_PER_S
            rate = tokens * batch / seconds
            prefill.append(
                PrefillPoint(tokens, batch, Samples([seconds] * 3), rate, flops, flops / seconds)
            )
    decode = []
    for batch in plan.decode_batches:
        for context in plan.decode_contexts:
            moved = shapes.decode_bytes(dtype, batch, context)
            seconds = moved / DECODE_BYTES_PER_S
            rate = batch / seconds
            decode.append(
                DecodePoint(batch, context, Samples([seconds] * 3), rate, moved, DECODE_BYTES_PER_S)
            )
    return Measurements(Environment("cpu", "cpu", dtype=dtype), prefill, decode)


def test_calibrated_predictions_at_held_out_shapes_recover_known_rates(shapes: Shapes) -> None:
    """Exact where measured times would be noise: each point left out is predicted from the
    others at its known time, but the fastest of its phase, which no pass undercuts: it is
    projected at the fastest of the rest. (The error on real timings is bench/estimate.py's.)"""
    from profiling.model.demo import ensure_demo

    config = json.loads((ensure_demo("demo") / "config.json").read_text())
    workload = Workload(prompt_tokens=256, output_tokens=64, concurrency=4)
    profile = known_rates(shapes, workload, config["max_position_embeddings"])
    assert len(profile.prefill) >= 8 and len(profile.decode) >= 6  # enough to leave one out
    predictions = leave_one_out(shapes, profile)
    assert {p.metric for p in predictions} == {"prefill_seconds", "decode_seconds_per_step"}
    assert len(predictions) == len(profile.prefill) + len(profile.decode)
    for metric in ("prefill_seconds", "decode_seconds_per_step"):
        phase = sorted((p for p in predictions if p.metric == metric), key=lambda p: p.measured)
        fastest, second, rest = phase[0], phase[1], phase[1:]
        assert fastest.predicted == pytest.approx(second.measured, rel=1e-9)
        for p in rest:
            assert p.predicted == pytest.approx(p.measured, rel=1e-9), (metric, p.at)
    assert median_abs_error(predictions) == pytest.approx(0, abs=1e-9)
    fitted = calibrate(shapes, profile)
    assert fitted.basis == CALIBRATED and fitted.prefill.points == len(profile.prefill)
    assert fitted.prefill.flops_per_second == pytest.approx(PREFILL_FLOPS_PER_S, rel=1e-6)
    assert fitted.prefill.overhead_seconds == pytest.approx(PREFILL_OVERHEAD_S, rel=1e-6)
    assert fitted.decode.bytes_per_second == pytest.approx(DECODE_BYTES_PER_S, rel=1e-6)


def test_a_mixture_of_experts_reads_only_the_experts_its_rows_route_to() -> None:
    shapes = Shapes.from_config(shipped_configs()["mixtral-8x7b"])
    everything = shapes.weights_bytes("bfloat16")
    one = shapes.decode_bytes("bfloat16", 1, 0)
    # Batch 1 routes to 2 of 8 experts: about 13 B of the 47 B parameters are read.
    assert one / everything == pytest.approx(12.9 / 46.7, rel=0.05)
    many = shapes.decode_bytes("bfloat16", 64, 0)
    assert one < shapes.decode_bytes("bfloat16", 4, 0) < many <= everything
    assert many / everything > 0.99  # a big batch touches nearly every expert
    dense = Shapes.from_config(shipped_configs()["llama-3.1-8b"])
    assert dense.decode_bytes("bfloat16", 1, 0) == dense.weights_bytes("bfloat16")


def test_an_moe_layer_takes_at_least_its_kernels_floor_and_a_dense_one_none() -> None:
    from profiling.projection.step_time import MOE_LAYER_FLOOR_S, StepModel

    gpu = hardware.lookup("H100")
    configs = shipped_configs()
    moe = Shapes.from_config(configs["gpt-oss-120b"])
    step = StepModel(moe, assumed(gpu, "bfloat16", moe.num_layers), "bfloat16", "", 8, gpu)
    # One token at TP=8: each layer's 4 bf16 experts are ~25 MB over 8 GPUs, ~10 µs of
    # HBM time at the assumed share: the rest of the floor is added in every MoE layer.
    one = step.moe_floor(moe.experts_touched(1) / 8)
    read = 4 * moe.expert_bytes("bfloat16") / 8 / step.rates.decode.bytes_per_second
    assert 5e-6 < read < 15e-6
    assert one == pytest.approx(moe.sized.moe_layers * (MOE_LAYER_FLOOR_S - read))
    # A large batch reads every expert: its bytes take longer than the floor.
    assert step.moe_floor(moe.experts_touched(512) / 8) == 0.0
    dense = Shapes.from_config(configs["llama-3.1-8b"])
    flat = StepModel(dense, assumed(gpu, "bfloat16", dense.num_layers), "bfloat16", "", 1, gpu)
    assert flat.moe_floor(0.0) == 0.0
