"""The layout search and the parallel advice it gives on the datasheet: replicas where
throughput is the goal, tensor parallelism where only it meets a TPOT target,
disaggregation only where the simulation shows prefill stalls missing a target."""

from __future__ import annotations

from profiling.advice.build import estimate_report
from profiling.config import Workload
from profiling.measure.hardware import lookup
from profiling.model.shapes import Shapes
from profiling.parallel import layouts
from profiling.projection.calibration import assumed
from profiling.projection.estimate import shipped_configs

H100 = lookup("H100")


def shapes(name: str) -> Shapes:
    return Shapes.from_config(shipped_configs()[name])


def search(name: str, gpus: int, work: Workload) -> list[layouts.Layout]:
    s = shapes(name)
    return layouts.search(s, assumed(H100, "bfloat16", s.num_layers), "bfloat16", work, H100, gpus)


def test_an_8b_on_8_gpus_with_many_users_is_served_best_as_replicas(monkeypatch):
    work = Workload(prompt_tokens=512, output_tokens=128, concurrency=512)
    simulated: list[tuple[int, int]] = []  # (tp, pp) of each engine simulation run
    real = layouts.simulate

    def simulate(step, *args, **kwargs):
        simulated.append((step.step.devices, step.pp))
        return real(step, *args, **kwargs)

    monkeypatch.setattr(layouts, "simulate", simulate)
    found = search("llama-3.1-8b", 8, work)
    # The search's work: one simulation per way to use all 8 GPUs, none twice (its
    # wall time is bench/estimate.py's).
    assert simulated == [(x.tp, x.pp) for x in found] and len(found) == 10
    assert all(x.fits and x.tp * x.pp * x.replicas == 8 for x in found)
    pick = layouts.best(found)
    # Small engines side by side: TP=2 or TP=4 splits each GPU's weight reads and
    # arithmetic over more rows, which pays over TP=1 (4 replicas of TP=2 and 2 of TP=4
    # are within 2 % of each other); one TP=8 engine (all 512 users within vLLM's
    # 1,024-sequence limit on an H100) pays its all-reduces over every row.
    assert (pick.tp, pick.pp, pick.replicas) in ((2, 1, 4), (4, 1, 2))
    tp8 = next(x for x in found if x.tp == 8)
    tp1 = next(x for x in found if (x.tp, x.pp) == (1, 1))
    assert pick.throughput > tp1.throughput > tp8.throughput
    # Every user of the TP=8 engine runs in its steps (no sequence-limit queue), so
    # each step carries 512 rows and their all-reduces: no faster per user either.
    assert tp8.served.max_running >= 512
    assert tp8.served.tpot.p50 > pick.served.tpot.p50
    assert pick.name in {x.name for x in layouts.front(found)}
    assert "TP=8" not in {x.name for x in layouts.front(found)}

    advice, _ = estimate_report(shapes("llama-3.1-8b"), H100, 8, "bfloat16", work)
    (rec,) = [r for r in advice.recommendations if r.technique == "parallel"]
    assert rec.setting == f"serve 8× NVIDIA H100 80GB SXM as {pick.name}, not one TP=8 engine"
    tput = rec.expected_effect.changes[0]
    assert tput.after > tput.before and rec.gain == tput.after / tput.before


def test_tensor_parallelism_is_proposed_when_only_it_meets_the_tpot_target():
    # 64 users on one H100: ~18 ms TPOT; 8 GPUs as TP=8 or two TP=4 engines reach 4–4.5 ms.
    work = Workload(prompt_tokens=512, output_tokens=128, concurrency=64, tpot_ms=5.0)
    advice, _ = estimate_report(shapes("llama-3.1-8b"), H100, 1, "bfloat16", work)
    (rec,) = [r for r in advice.recommendations if r.technique == "parallel"]
    assert "TP=" in rec.setting and "× NVIDIA H100" in rec.setting
    devices, tpot = rec.expected_effect.changes
    assert devices.before == 1 and devices.after > 1
    assert tpot.after <= 5.0 < tpot.before
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


def test_a_mixture_of_experts_is_also_laid_out_with_its_experts_spread():
    work = Workload(prompt_tokens=512, output_tokens=128, concurrency=512)
    found = search("mixtral-8x7b", 8, work)
    spread = {x.ep: x for x in found if x.ep > 1}
    assert set(spread) == {2, 4, 8}
    assert spread[8].name == "DP=8 attention + EP=8 experts" and spread[8].gpus == 8
    assert spread[2].name == "4 replicas of DP=2 attention + EP=2 experts"
    assert all(x.fits for x in spread.values())
    assert not next(x for x in found if (x.tp, x.pp, x.ep) == (1, 1, 1)).fits  # 87 GiB whole
    assert any("--enable-expert-parallel" in n for n in spread[8].notes)
    assert not [x for x in search("llama-3.1-8b", 8, work) if x.ep > 1]  # dense: no experts


def test_an_expert_parallel_rank_holds_and_reads_the_shared_weights_and_its_experts():
    s = shapes("mixtral-8x7b")
    rates = assumed(H100, "bfloat16", s.num_layers)
    rank = layouts.ExpertParallel(layouts.StepModel(s, rates, "bfloat16", "", 1, H100), 8)
    shared, expert = s.shared_weights_bytes("bfloat16"), s.expert_bytes("bfloat16")
    assert rank.weights_held() == shared + s.num_layers * 8 * expert / 8
    assert s.weights_bytes("bfloat16") == shared + s.num_layers * 8 * expert
    # One row on each of 8 ranks touches the experts 8 rows route to, a rank its eighth
    # of them; a TP=8 device reads an eighth of the same experts and of the shared part.
    assert rank.weights_read(1) == shared + s.num_layers * s.experts_touched(8) / 8 * expert
    tp8 = layouts.StepModel(s, rates, "bfloat16", "", 8, H100)
    _, tp_bytes, _ = tp8.work(8, 8 * 640)
    kv = s.kv_bytes_per_token("bfloat16") * 8 * 640 / 8
    assert rank.weights_read(1) - (tp_bytes - kv) == shared * 7 / 8


def test_a_mixture_on_more_gpus_never_scales_beyond_their_number():
    h200 = lookup("H200")
    s = shapes("mixtral-8x7b")
    work = Workload(prompt_tokens=512, output_tokens=128, concurrency=256)
    rates = assumed(h200, "bfloat16", s.num_layers)
    one = layouts.best(layouts.search(s, rates, "bfloat16", work, h200, 1)).throughput
    for gpus in (2, 4, 8):
        found = layouts.search(s, rates, "bfloat16", work, h200, gpus)
        assert max(x.throughput for x in found) <= gpus * one * 1.001
