"""The deployment search and its ranking: held-out style scenarios, each with its expected
answer and why; capacity against the simulation; cost from the price table."""

from __future__ import annotations

import pytest

from profiling.advice.build import estimate_report
from profiling.advice.ranking import meets, rank
from profiling.config import Hardware, Workload
from profiling.measure import hardware
from profiling.measure.hardware_prices import price
from profiling.model.shapes import Shapes
from profiling.options import WEIGHT_FORMATS
from profiling.projection.calibration import assumed
from profiling.projection.configurations import Configuration
from profiling.projection.deployments import FIRST_ONLY, Capacity, capacity, cost, deployments
from profiling.projection.estimate import shipped_configs
from profiling.projection.search import Scenario, serve
from profiling.projection.speculation import verify_seconds
from profiling.projection.step_time import StepModel
from profiling.technique_kit.advice_results import ESTIMATED, Change, ExpectedEffect, Recommendation

H100 = hardware.lookup("H100")


def scenario(model: str, gpus: int, w: Workload, acceptance: float | None = None) -> Scenario:
    shapes = Shapes.from_config(shipped_configs()[model])
    current = Configuration(H100.key, tp=gpus)
    return Scenario(shapes, H100, gpus, "bfloat16", w, current, acceptance, "given")


# (model, GPUs, workload, what the first action must be, why)
SCENARIOS = {
    "8B on one H100, TPOT 4 ms": (
        "llama-3.1-8b", 1, Workload(concurrency=1, tpot_ms=4), lambda c: c.weights == "int4",
        "bf16 decode reads 15 GiB a token (~7 ms); int4 reads a third and meets 4 ms on the one "
        "GPU: one flag, not three more GPUs",
    ),
    "70B on one H100 (memory-bound)": (
        "llama-3.1-70b", 1, Workload(concurrency=8, tpot_ms=100),
        lambda c: c.weights in ("fp8", "int8", "int4"),
        "140 GB of bf16 weights cannot fit 80 GB: only an 8- or 4-bit format serves it on one GPU",
    ),
    "long shared prefix, TTFT 60 ms": (
        "llama-3.1-8b", 1,
        Workload(prompt_tokens=8192, shared_prefix_tokens=7936, output_tokens=64, concurrency=4,
                 ttft_ms=60),
        lambda c: c.prefix_caching,
        "prefilling 8k tokens takes longer than 60 ms; with the 7.9k shared prefix cached only "
        "256 tokens are prefilled",
    ),
    "8 H100s at high load": (
        "llama-3.1-8b", 8, Workload(prompt_tokens=1024, output_tokens=128, concurrency=256,
                                    tpot_ms=40),
        lambda c: c.gpus == 8,
        "an 8B model on 8 GPUs meets 40 ms at 256 users as it is or with replicas: no more GPUs",
    ),
    "MoE at low load": (
        "mixtral-8x7b", 2, Workload(concurrency=1, tpot_ms=10), lambda c: c.gpus == 2,
        "one user on 2 GPUs: decode reads only the experts its token routes to",
    ),
    "MoE at high load": (
        "mixtral-8x7b", 8, Workload(prompt_tokens=1024, output_tokens=128, concurrency=128,
                                    tpot_ms=50),
        lambda c: c.gpus == 8,
        "8 GPUs hold the experts with room for 128 users' KV caches and meet 50 ms",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_first_action_meets_the_target_on_the_users_gpus(name: str) -> None:
    model, gpus, w, expected, why = SCENARIOS[name]
    found = deployments(scenario(model, gpus, w))
    first = found.first
    assert first is not None, why
    assert first.on_your_gpus and first.meets, why
    assert expected(first.configuration), f"{first.configuration.name}: expected because {why}"
    # Every configuration ranked above it would have to meet too, with no more changes.
    assert all(e.meets for e in found.ranked[: found.pick])


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_advices_first_recommendation_meets_the_target_without_more_gpus(name: str) -> None:
    model, gpus, w, _, why = SCENARIOS[name]
    shapes = Shapes.from_config(shipped_configs()[model])
    advice, _ = estimate_report(shapes, H100, gpus, "bfloat16", w,
                                deployment=Hardware(gpu_kind=H100.key, gpu_count=gpus))  # fmt: skip
    first = advice.first
    assert first is not None and not first.more_hardware, why
    assert meets(first, w) is True, f"{first.setting}: {first.expected_effect.text}"


def test_the_issues_example_puts_a_change_to_the_one_gpu_before_more_gpus() -> None:
    w = Workload(concurrency=1, tpot_ms=4)
    shapes = Shapes.from_config(shipped_configs()["llama-3.1-8b"])
    advice, _ = estimate_report(shapes, H100, 1, "bfloat16", w, "generation",
                                deployment=Hardware(gpu_kind=H100.key))  # fmt: skip
    first = advice.first
    assert first is not None and not first.more_hardware
    assert first.technique == "quantization" and "int4" in first.setting
    more = [r for r in advice.recommendations if r.more_hardware]
    assert all(r.setting.startswith("with more hardware") for r in more)
    assert advice.deployments is not None and advice.deployments["pick"] == 0


def test_more_hardware_appears_only_when_no_configuration_of_the_users_gpus_meets() -> None:
    # 70B at 8 users and 15 ms: one H100 cannot reach it in any precision (int4 still reads
    # ~35 GiB a step); more GPUs can.
    found = deployments(scenario("llama-3.1-70b", 1, Workload(concurrency=8, tpot_ms=15)))
    assert not any(e.meets for e in found.ranked if e.on_your_gpus)
    assert found.pick is None and found.more_hardware is not None
    line = found.ranked[found.more_hardware]
    assert line.meets and line.configuration.gpus > 1
    assert "with any layout, precision or technique" in " ".join(found.notes)


def test_speculation_is_searched_only_with_a_known_acceptance() -> None:
    w = Workload(concurrency=1, tpot_ms=4)
    without = deployments(scenario("llama-3.1-8b", 1, w))
    assert not any(e.configuration.draft for e in without.ranked)
    given = deployments(scenario("llama-3.1-8b", 1, w, acceptance=0.7))
    drafted = [e for e in given.ranked if e.configuration.draft]
    assert drafted and all(e.configuration.draft_tokens > 0 for e in drafted)
    plain = next(e for e in given.ranked if e.configuration == Configuration(H100.key))
    assert min(e.tpot_p50 for e in drafted) < plain.tpot_p50


def test_capacity_is_the_last_user_count_meeting_the_targets_in_the_simulation() -> None:
    sc = scenario("llama-3.1-8b", 1, Workload(concurrency=4, tpot_ms=12))
    found = deployments(sc)
    first = found.first
    assert first is not None
    cap = capacity(sc, first)
    assert cap.users is not None and cap.users >= 4
    assert serve(sc, first.configuration, cap.users).meets
    assert not serve(sc, first.configuration, cap.users + 1).meets
    below = [serve(sc, first.configuration, n).meets for n in (1, cap.users // 2, cap.users)]
    assert all(below)  # monotone below the boundary
    text = f"meets your targets up to {cap.users} users; you asked for 4"
    assert found.headroom(found.pick) == text
    assert found.to_dict()["configurations"][found.pick]["headroom"] == text


def test_every_configuration_gets_its_capacity_and_the_what_if_only_the_first() -> None:
    sc = scenario("llama-3.1-8b", 2, Workload(concurrency=16, tpot_ms=9, ttft_ms=400))
    found = deployments(sc)
    bounded = 0
    for e, cap in zip(found.ranked, found.capacities, strict=True):
        if cap.users is None:  # even one user misses the targets
            assert not serve(sc, e.configuration, 1).meets
            continue
        assert serve(sc, e.configuration, cap.users).meets, e.configuration.name
        if not cap.at_least:
            assert not serve(sc, e.configuration, cap.users + 1).meets, e.configuration.name
            bounded += 1
    assert bounded >= 3  # the guided search closed real brackets, not only "or more"
    quick = deployments(sc, capacity_for=FIRST_ONLY)
    assert [c.users for c in quick.capacities if c.users is not None] == [
        found.capacities[found.pick].users
    ]


def test_capacity_never_falls_as_the_target_loosens_or_the_gpus_grow() -> None:
    c = Configuration(H100.key, weights="fp8")
    users = []
    for tpot in (8, 12, 20, 40):
        sc = scenario("llama-3.1-8b", 1, Workload(concurrency=4, tpot_ms=tpot))
        users.append(capacity(sc, serve(sc, c)).users or 0)
    assert users == sorted(users) and users[-1] > users[0]
    w = Workload(concurrency=8, tpot_ms=8)  # both capacities below the search's span (16×)
    one = capacity(scenario("llama-3.1-8b", 1, w), serve(scenario("llama-3.1-8b", 1, w), c))
    two_sc = scenario("llama-3.1-8b", 2, w)
    two = capacity(two_sc, serve(two_sc, Configuration(H100.key, replicas=2, weights="fp8")))
    assert one.users is not None and two.users is not None and not two.at_least
    assert two.users >= 2 * one.users - 1  # two copies: twice the users, to rounding


def test_cost_follows_the_price_table_and_the_given_price() -> None:
    sc = scenario("llama-3.1-8b", 1, Workload(concurrency=4, tpot_ms=12))
    first = deployments(sc).first
    assert first is not None
    table = price(H100.key)
    assert table is not None and table.source.startswith("https://") and table.read
    cap = Capacity(users=10, request_rate=1.0, goodput_tokens_per_second=2000.0)
    out = cost(first, cap, table)
    per_second = table.usd_per_hour / 3600
    assert out["usd_per_million_output_tokens"] == pytest.approx(
        per_second / first.throughput * 1e6
    )
    assert out["usd_per_million_at_capacity"] == pytest.approx(per_second / 2000.0 * 1e6)
    assert out["gpu_hours_per_day"] == 24.0
    # Their users' throughput over the goodput at capacity: the hours their traffic needs.
    assert out["gpu_hours_per_day_at_capacity"] == pytest.approx(24.0 * first.throughput / 2000.0)
    rate = Workload(concurrency=4, request_rate=2.0, output_tokens=128, tpot_ms=12)
    assert cost(first, cap, table, rate)["gpu_hours_per_day_at_capacity"] == pytest.approx(
        24.0 * 2.0 * 128 / 2000.0
    )
    assert cost(first, Capacity(), table)["gpu_hours_per_day_at_capacity"] is None
    given = price(H100.key, 1.5)
    assert given is not None and given.usd_per_hour == 1.5
    assert price("GB300") is None  # no public on-demand price found for it: its cost says so
    assert cost(first, cap, None)["usd_per_million_output_tokens"] is None


def _rec(technique: str, tpot_after: float, gain: float, **kw: object) -> Recommendation:
    return Recommendation(
        technique, technique, ExpectedEffect("", [Change("tpot_ms", 8.0, tpot_after, "ms")]), [],
        [], ESTIMATED, "generation", gain, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_technique_whose_section_says_it_cannot_meet_the_target_ranks_after_one_that_does() -> (
    None
):
    w = Workload(concurrency=16, tpot_ms=5)
    split = _rec("disaggregation", 4.0, 3.0, meets_targets=False)  # decode alone misses
    quant = _rec("quantization", 4.5, 1.8)
    more = _rec("parallel", 2.0, 4.0, meets_targets=True, more_hardware=True)
    ranked = rank([split, more, quant], "generation", w)
    assert [r.technique for r in ranked] == ["quantization", "disaggregation", "parallel"]


@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b"])
@pytest.mark.parametrize("weights", ["auto", "int4"])
def test_the_verify_pass_summed_at_once_is_the_step_model_chunk_by_chunk(model, weights) -> None:
    shapes = Shapes.from_config(shipped_configs()[model])
    precision = WEIGHT_FORMATS[weights] or "bfloat16"
    step = StepModel(shapes, assumed(H100, precision, shapes.num_layers), precision, "", 2, H100)
    for rows, chunks in [(1, ()), (64, ()), (256, ((512, 0), (300, 1024)))]:
        verify = tuple((3, 1700) for _ in range(rows))
        expected = step.seconds(0, 0, verify + chunks)
        assert verify_seconds(step, rows, 3, 1700, chunks) == pytest.approx(expected, rel=1e-12)
