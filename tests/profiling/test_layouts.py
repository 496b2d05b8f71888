"""The layout search and the parallel advice it gives on the datasheet: replicas where
throughput is the goal, tensor parallelism where only it meets a TPOT target,
disaggregation only where the simulation shows prefill stalls missing a target."""

from __future__ import annotations

import time

from profiling.advice.build import estimate_report
from profiling.config import Workload
from profiling.estimate import assumed, shipped_configs
from profiling.hardware import lookup
from profiling.parallel import layouts
from profiling.shapes import Shapes

H100 = lookup("H100")


def shapes(name: str) -> Shapes:
    return Shapes.from_config(shipped_configs()[name])


def search(name: str, gpus: int, work: Workload) -> list[layouts.Layout]:
    s = shapes(name)
    return layouts.search(s, assumed(H100, "bfloat16", s.num_layers), "bfloat16", work, H100, gpus)


def test_an_8b_on_8_gpus_with_many_users_is_served_best_as_replicas():
    work = Workload(prompt_tokens=512, output_tokens=128, concurrency=512)
    started = time.perf_counter()
    found = search("llama-3.1-8b", 8, work)
    elapsed = time.perf_counter() - started
    pick = layouts.best(found)
    # Small engines side by side: TP=2 halves each GPU's weight reads for twice the
    # rows, which pays over TP=1 at 128 users a copy; one TP=8 engine does not.
    assert (pick.tp, pick.pp, pick.replicas) == (2, 1, 4)
    tp8 = next(x for x in found if x.tp == 8)
    tp1 = next(x for x in found if (x.tp, x.pp) == (1, 1))
    assert pick.throughput > tp1.throughput > 1.2 * tp8.throughput
    assert tp8.served.tpot.p50 < pick.served.tpot.p50  # the split is faster per user
    assert {x.name for x in layouts.front(found)} >= {"4 replicas of TP=2", "TP=8"}
    assert elapsed < 2.0  # generous on a shared machine; bench/ keeps the real figure

    advice, _ = estimate_report(shapes("llama-3.1-8b"), H100, 8, "bfloat16", work)
    (rec,) = [r for r in advice.recommendations if r.technique == "parallel"]
    assert rec.setting == "serve 8× NVIDIA H100 80GB SXM as 4 replicas of TP=2, not one TP=8 engine"
    tput = rec.expected_effect.changes[0]
    assert tput.after > tput.before and rec.gain == tput.after / tput.before


def test_tensor_parallelism_is_proposed_when_only_it_meets_the_tpot_target():
    work = Workload(prompt_tokens=512, output_tokens=128, concurrency=64, tpot_ms=4.0)
    advice, _ = estimate_report(shapes("llama-3.1-8b"), H100, 1, "bfloat16", work)
    (rec,) = [r for r in advice.recommendations if r.technique == "parallel"]
    assert "TP=" in rec.setting and "× NVIDIA H100" in rec.setting
    devices, tpot = rec.expected_effect.changes
    assert devices.before == 1 and devices.after > 1
    assert tpot.after <= 4.0 < tpot.before
    # Without the target the one GPU serves the same users, and nothing is proposed.
    free = Workload(prompt_tokens=512, output_tokens=128, concurrency=64)
    advice, _ = estimate_report(shapes("llama-3.1-8b"), H100, 1, "bfloat16", free)
    assert not [r for r in advice.recommendations if r.technique == "parallel"]


def test_more_gpus_never_scale_throughput_beyond_their_number():
    work = Workload(prompt_tokens=512, output_tokens=128, concurrency=256)
    one = layouts.best(search("llama-3.1-8b", 1, work)).throughput
    for gpus in (2, 4, 8):
        best = layouts.best(search("llama-3.1-8b", gpus, work))
        assert best.throughput <= gpus * one * 1.001


def test_a_70b_does_not_fit_one_replica_per_gpu():
    work = Workload(prompt_tokens=2048, output_tokens=256, concurrency=64, tpot_ms=50)
    found = search("llama-3.1-70b", 8, work)
    assert not next(x for x in found if (x.tp, x.pp) == (1, 1)).fits
    pick = layouts.best(found)
    assert pick.tp * pick.pp >= 2 and pick.served.tpot.p90 <= 0.050


def test_disaggregation_is_not_offered_at_low_concurrency():
    for users in (1, 4):
        work = Workload(prompt_tokens=4096, output_tokens=256, concurrency=users, tpot_ms=10)
        advice, _ = estimate_report(shapes("llama-3.1-8b"), H100, 1, "bfloat16", work)
        assert "disaggregation" not in {r.technique for r in advice.recommendations}
        (why,) = [n.why for n in advice.not_recommended if n.technique == "disaggregation"]
        assert "one request at a time" in why or "simulated serving" in why

