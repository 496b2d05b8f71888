"""The simulated engine: continuous batching with chunked prefill, checked against cases
whose answer is known in closed form, and against the properties a served workload has."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from profiling.measure.hardware import lookup
from profiling.model.shapes import Shapes
from profiling.projection.calibration import assumed
from profiling.projection.estimate import Deployment, Traffic, project, shipped_configs
from profiling.projection.serving import Requests, percentiles, simulate
from profiling.projection.step_time import StepModel


@dataclass
class Fixed:
    """A phase whose every pass takes the same time."""

    value: float

    def seconds(self, flops: float, bytes_: float) -> float:
        return self.value


@dataclass
class FixedRates:
    prefill: Fixed
    decode: Fixed


def fixed_step(seconds: float) -> StepModel:
    return StepModel(llama8b(), FixedRates(Fixed(seconds), Fixed(seconds)), "bfloat16")


def llama8b() -> Shapes:
    return Shapes.from_config(shipped_configs()["llama-3.1-8b"])


def h100_step(devices: int = 1, dtype: str = "bfloat16") -> StepModel:
    gpu = lookup("H100")
    shapes = llama8b()
    return StepModel(shapes, assumed(gpu, dtype, shapes.num_layers), dtype, "", devices, gpu)


def test_one_user_with_fixed_steps_is_exact():
    # Prompt in one step (first token), then 9 decode steps, back to back.
    served = simulate(fixed_step(0.01), Requests(100, 10, concurrency=1, requests=5))
    assert served.requests == 5
    assert served.ttft.p50 == pytest.approx(0.01)
    assert served.tpot.p99 == pytest.approx(0.01)
    assert served.e2e.p50 == pytest.approx(0.10)
    assert served.output_tokens_per_second == pytest.approx(100)
    assert served.queue_share == 0
    assert served.itl.p50 == pytest.approx(0.01)


def test_a_benchmark_start_lines_every_user_up_at_t0():
    # A benchmark client at a concurrency limit sends both first requests at t = 0:
    # A's prompt fills step 1; B's takes steps 2 and 3 beside A's decode row. A ends
    # at step 10, B at step 12, and the run's 20 tokens over 0.12 s is its throughput.
    served = simulate(fixed_step(0.01), Requests(1000, 10, concurrency=2, requests=2,
                      max_batched_tokens=1000, lined_up=True))  # fmt: skip
    assert served.ttft.p50 == pytest.approx(0.01)
    assert served.ttft.p99 == pytest.approx(0.03)
    assert served.ttft_mean == pytest.approx(0.02)
    assert served.e2e.p99 == pytest.approx(0.12)
    assert served.output_tokens_per_second == pytest.approx(20 / 0.12)
    # In steady state B arrives half a request later, after A's prompt: no wave.
    steady = simulate(fixed_step(0.01), Requests(1000, 10, concurrency=2, requests=2,
                      max_batched_tokens=1000))  # fmt: skip
    assert steady.ttft_mean < served.ttft_mean


def test_a_prompt_longer_than_the_step_budget_takes_several_steps():
    served = simulate(
        fixed_step(0.01), Requests(1000, 4, concurrency=1, requests=3, max_batched_tokens=256)
    )
    assert served.ttft.p50 == pytest.approx(0.04)  # 256 + 256 + 256 + 232 tokens


def test_users_beyond_the_kv_cache_wait_in_the_queue():
    served = simulate(fixed_step(0.01), Requests(100, 10, concurrency=4, kv_tokens=2 * 110))
    assert served.max_running == 2
    assert served.queue_share > 0.3  # half the users wait about one request's time
    assert any("2 requests run at a time (what the KV cache holds)" in n for n in served.notes)
    unlimited = simulate(fixed_step(0.01), Requests(100, 10, concurrency=4))
    assert served.ttft.p50 > 3 * unlimited.ttft.p50


def test_the_means_are_reported_beside_the_percentiles():
    # One user at a time with fixed steps: every request sees the same latencies.
    one = simulate(fixed_step(0.01), Requests(100, 10, concurrency=1, requests=5))
    assert one.ttft_mean == pytest.approx(0.01)
    assert one.tpot_mean == pytest.approx(0.01)
    assert one.itl_mean == pytest.approx(0.01)
    # Users wait for the KV cache: most TTFTs are a whole request long, the first ones
    # one step; the mean (what most serving benchmarks print) counts both, the median
    # only the queued ones.
    queued = simulate(fixed_step(0.01), Requests(100, 10, concurrency=4, kv_tokens=2 * 110))
    assert one.ttft_mean < queued.ttft_mean < queued.ttft.p50


def test_no_room_for_one_request_is_an_error():
    with pytest.raises(ValueError, match="does not fit"):
        simulate(fixed_step(0.01), Requests(100, 10, concurrency=1, kv_tokens=50))


def test_prefill_mixed_into_decode_steps_slows_tokens():
    step = h100_step()
    served = simulate(step, Requests(2048, 128, concurrency=32))
    alone = step.seconds(32, 32 * (2048 + 64))
    assert served.tpot.p50 > alone  # each arriving prompt rides a decode step
    assert served.itl.p99 > 1.5 * alone  # and the step carrying it is the slow one
    assert served.mixed_step_share > 0.05


def test_throughput_never_scales_beyond_the_users():
    step = h100_step()
    one = simulate(step, Requests(512, 128, concurrency=1)).output_tokens_per_second
    previous = one
    for users in (2, 8, 32, 128):
        tput = simulate(step, Requests(512, 128, concurrency=users)).output_tokens_per_second
        assert previous <= tput <= users * one * 1.001
        previous = tput


def test_latency_grows_with_load_in_an_open_loop():
    step = h100_step()
    light = simulate(step, Requests(512, 128, rate=1.0, requests=100))
    heavy = simulate(step, Requests(512, 128, rate=40.0, requests=300))
    assert light.mode == "open" and light.arrival_rate == 1.0
    assert heavy.ttft.p99 > light.ttft.p99
    assert heavy.tpot.p50 > light.tpot.p50
    assert heavy.requests_per_second > 10 * light.requests_per_second


def test_goodput_counts_the_requests_that_meet_both_targets():
    step = h100_step()
    easy = simulate(step, Requests(512, 128, concurrency=8, ttft_slo=10.0, tpot_slo=1.0))
    assert easy.slo_attainment == 1.0
    assert easy.goodput_requests_per_second == pytest.approx(easy.requests_per_second)
    hard = simulate(step, Requests(512, 128, concurrency=8, tpot_slo=1e-6))
    assert hard.slo_attainment == 0.0 and hard.goodput_requests_per_second == 0.0
    none = simulate(step, Requests(512, 128, concurrency=8))
    assert none.goodput_requests_per_second is None


def test_tensor_parallel_steps_pay_their_all_reduces():
    one, two = h100_step(1), h100_step(2)
    rows = 16
    split = two.seconds(rows, rows * 1000)
    assert split > one.seconds(rows, rows * 1000) / 2  # not a free halving
    assert split < one.seconds(rows, rows * 1000)


def test_weighted_percentiles():
    p = percentiles([1.0, 2.0, 3.0], [98, 1, 1])
    assert (p.p50, p.p90, p.p99) == (1.0, 1.0, 2.0)  # 99 of 100 at or below 2
    assert percentiles([1.0, 2.0, 3.0], [97, 1, 2]).p99 == 3.0
    assert percentiles([5.0]).p99 == 5.0


def test_percentiles_are_the_first_sample_whose_running_share_reaches_each_one():
    import random

    def running(values, weights):  # the definition, sample by sample
        pairs = sorted(zip(values, weights, strict=True))
        total, out = sum(weights), []
        for q in (0.50, 0.90, 0.99):
            seen = 0.0
            for value, weight in pairs:
                seen += weight
                if seen >= q * total - 1e-9:
                    out.append(value)
                    break
            else:
                out.append(pairs[-1][0])
        return tuple(out)

    rng = random.Random(7)
    for n in (1, 2, 3, 10, 99, 100, 101, 1000):
        for _ in range(20):
            values = [rng.choice((rng.random(), round(rng.random(), 1))) for _ in range(n)]
            weights = [rng.choice((0, 1, 3, 250, 0.5)) for _ in range(n)]
            for given in (None, weights):
                p = percentiles(values, given)
                assert (p.p50, p.p90, p.p99) == running(values, given or [1.0] * n)


def test_pricing_each_distinct_step_once_changes_no_figure(monkeypatch):
    from profiling.projection import serving
    from profiling.projection.speculation import Speculating
    from profiling.projection.step_time import Staged

    step = h100_step()
    runs = [
        (step, 2048, 256, {"concurrency": 200, "kv_tokens": 150 * 2304}),  # a queue
        (step, 2048, 256, {"concurrency": 64, "cached_tokens": 1024}),
        (step, 20_000, 64, {"concurrency": 8}),  # prompts over several steps
        (step, 512, 128, {"rate": 30.0, "requests": 200, "tpot_slo": 0.02}),
        (step, 1024, 64, {"concurrency": 32, "lined_up": True, "ttft_slo": 0.5}),
        (Staged(h100_step(2), 2), 2048, 128, {"concurrency": 48}),
        (Speculating(step, 0.7, 3), 2048, 128, {"concurrency": 24}),
    ]
    once = [simulate(s, Requests(p, o, **kw)).to_dict() for s, p, o, kw in runs]
    monkeypatch.setattr(serving, "_priced", lambda step: step.seconds)
    assert [simulate(s, Requests(p, o, **kw)).to_dict() for s, p, o, kw in runs] == once


def test_the_projection_reports_the_served_percentiles():
    gpu = lookup("H100")
    shapes = llama8b()
    rates = assumed(gpu, "bfloat16", shapes.num_layers)
    p = project(shapes, rates, "bfloat16", Traffic(512, 128, 16, tpot_ms=50), Deployment(gpu, 1))
    assert p.served is not None
    assert p.ttft_seconds == p.served.ttft.p50 and p.tpot_seconds == p.served.tpot.p50
    assert p.served.ttft.p99 >= p.ttft_seconds
    assert p.prefill_alone_seconds <= p.ttft_seconds
    assert p.served.slo_attainment == 1.0
    # The simulation of a whole scenario stays cheap enough for a layout search.
    assert p.served.steps < 5000


def test_a_cached_prefix_is_prefilled_no_more_and_held_once():
    step = h100_step()
    cold = simulate(step, Requests(2048, 64, concurrency=8))
    warm = simulate(step, Requests(2048, 64, concurrency=8, cached_tokens=1536))
    assert warm.ttft.p50 < cold.ttft.p50 / 2  # a quarter of the prompt left to prefill
    # Room for 3 requests of 2,112 tokens cold; with the prefix's 1,536 held once,
    # (6,436 - 1,536) // 576 = 8.
    cold_room = simulate(step, Requests(2048, 64, concurrency=16, kv_tokens=3 * 2112 + 100))
    warm_room = simulate(step, Requests(2048, 64, concurrency=16, kv_tokens=3 * 2112 + 100,
                         cached_tokens=1536))  # fmt: skip
    assert (cold_room.max_running, warm_room.max_running) == (3, 8)


def test_the_prefix_cache_estimate_is_the_served_ttft_with_and_without_it():
    from profiling.advice.build import estimate_report
    from profiling.config import Workload

    work = Workload(prompt_tokens=2048, output_tokens=128, concurrency=16,
                    shared_prefix_tokens=1536)  # fmt: skip
    advice, points = estimate_report(llama8b(), lookup("H100"), 1, "bfloat16", work)
    (rec,) = [r for r in advice.recommendations if r.technique == "caching"]
    (ttft,) = [p.predicted for p in points if p.metric == "ttft_seconds"]
    (change,) = rec.expected_effect.changes
    assert change.before == pytest.approx(ttft * 1e3)  # the TTFT the page shows
    rates = assumed(lookup("H100"), "bfloat16", llama8b().num_layers)
    warm = project(llama8b(), rates, "bfloat16", Traffic(2048, 128, 16, cached_tokens=1536),
                   Deployment(lookup("H100")))  # fmt: skip
    assert change.after == pytest.approx(warm.ttft_seconds * 1e3)
    assert "at your 16 users" in rec.expected_effect.text


def test_a_step_of_prompt_chunks_alone_is_priced_by_the_prefill_fit():
    from profiling.projection.calibration import CALIBRATED, Calibration, PhaseRate

    # A measured decode fit whose FLOP rate is far below prefill's, as on a CPU profile.
    rates = Calibration(
        CALIBRATED, "cpu", PhaseRate(60e9, None, 1e-3, 4), PhaseRate(10e9, None, 2e-3, 6)
    )
    shapes = Shapes.from_config(shipped_configs()["llama-3.1-8b"])
    step = StepModel(shapes, rates, "bfloat16")
    flops, bytes_, _ = step.work(0, 0, ((24, 80),))
    assert step.seconds(0, 0, ((24, 80),)) == pytest.approx(rates.prefill.seconds(flops, bytes_))
    # Decode rows in the step: the slower of the two fits prices it.
    flops, bytes_, _ = step.work(4, 400, ((24, 80),))
    mixed = step.seconds(4, 400, ((24, 80),))
    assert mixed == pytest.approx(rates.decode.seconds(flops, bytes_))
    assert mixed > rates.prefill.seconds(flops, bytes_)
