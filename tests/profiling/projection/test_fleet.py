"""The fleet: the fewest GPUs of each kind carrying a load within the targets, held against
the simulated engine (the chosen count carries it, one replica fewer does not), the kinds
that cannot carry it said in words, prices (the catalog's, the user's own) and ranking."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from profiling.config import Workload
from profiling.measure import hardware
from profiling.measure.hardware_power import power, unpowered
from profiling.measure.hardware_prices import price
from profiling.model.shapes import Shapes
from profiling.projection.configurations import Configuration
from profiling.projection.estimate import shipped_configs
from profiling.projection.fleet import (
    Fleet,
    FleetRequest,
    Load,
    fleet,
    replica_capacity,
)
from profiling.projection.precision import serving_precision
from profiling.projection.search import Measured, Scenario, serve

H100 = hardware.lookup("H100")
DEFAULT_TARGETS = {"prompt_tokens": 2000, "output_tokens": 300, "ttft_ms": 1000, "tpot_ms": 40}


def request(model: str, load: Load, kinds: tuple[str, ...], **options) -> FleetRequest:
    shapes = Shapes.from_config(shipped_configs()[model])
    w = Workload(**{**DEFAULT_TARGETS, **options.pop("workload", {})})
    sc = Scenario(shapes, H100, 1, serving_precision(shapes, ""), w, Configuration(H100.key))
    return FleetRequest(sc, load, kinds, **options)


def served_users(req: FleetRequest, kind: str, replica: Configuration, replicas: int, users: int):
    """`replicas` copies of `replica` serving `users` closed-loop users, split evenly, as
    the search serves them (`search.serve`), independently of the fleet's own code."""
    gpu = hardware.catalog()[kind]
    w = replace(req.scenario.workload, concurrency=users, request_rate=None)
    sc = replace(req.scenario, gpu=gpu, gpu_count=replica.gpus * replicas, workload=w,
                 current=replica)  # fmt: skip
    return serve(sc, replace(replica, replicas=replicas))


# (model, load, kinds): dense and MoE, users and request rates, big and small GPUs
SCENARIOS = {
    "8B, 64 users, H100 and L4": ("llama-3.1-8b", Load(users=64), ("H100-SXM", "L4")),
    "8B, 300 users, A100": ("llama-3.1-8b", Load(users=300), ("A100-80GB",)),
    "70B, 40 users, H100 and H200": ("llama-3.1-70b", Load(users=40), ("H100-SXM", "H200")),
    "MoE, 96 users, H100": ("mixtral-8x7b", Load(users=96), ("H100-SXM",)),
    "8B, 20 requests/s, H100 and L40S": (
        "llama-3.1-8b", Load(request_rate=20.0), ("H100-SXM", "L40S"),
    ),
    "70B, 3 requests/s, A100": ("llama-3.1-70b", Load(request_rate=3.0), ("A100-80GB",)),
}  # fmt: skip


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_chosen_count_carries_the_load_and_one_replica_fewer_does_not(name: str) -> None:
    model, load, kinds = SCENARIOS[name]
    req = request(model, load, kinds)
    found = fleet(req)
    assert [r.gpu for r in found.rows if r.carries], name
    for row in found.rows:
        assert row.carries and row.replica is not None and row.at_load is not None, row.reason
        replicas, c = row.replicas, row.replica
        assert c.replicas == 1 and c.gpus == row.gpus_per_replica <= 8
        gpu = hardware.catalog()[row.gpu]
        if load.users is not None:
            # Served as the search serves a deployment: the users split over the replicas.
            carried = served_users(req, row.gpu, c, replicas, load.users)
            assert carried.meets, f"{name}: {row.layout} misses at {load.text}"
            if replicas > 1:
                fewer = served_users(req, row.gpu, c, replicas - 1, load.users)
                assert fewer.meets is False, f"{name}: {replicas - 1} replicas carry it too"
        else:
            # A rate: each replica's capacity (most users meeting the targets, the requests/s
            # they complete) carries its share, and one replica fewer would overload them.
            cap = replica_capacity(req, gpu, c, row.capacity_users)
            assert cap.request_rate is not None
            assert replicas * cap.request_rate >= load.amount > (replicas - 1) * cap.request_rate
        assert row.at_load.meets, f"{name}: {row.layout} at the load"
        assert row.headroom(load) is not None and row.headroom(load) >= 0


def test_one_replica_carries_a_small_load_and_its_headroom_is_its_capacity() -> None:
    req = request("llama-3.1-8b", Load(users=8), ("H100-SXM",))
    row = fleet(req).rows[0]
    assert row.replicas == 1 and row.gpus == 1
    assert row.capacity_users >= 8
    assert row.headroom(req.load) == pytest.approx(row.capacity_users / 8 - 1)
    assert served_users(req, row.gpu, row.replica, 1, row.capacity_users).meets
    if not row.capacity_at_least:
        assert not served_users(req, row.gpu, row.replica, 1, row.capacity_users + 1).meets


def test_a_kind_whose_node_cannot_hold_the_weights_says_so() -> None:
    # DeepSeek-V3's 671 B parameters: even 4-bit, more than 8 L4s' 24 GB each.
    found = fleet(request("deepseek-v3", Load(users=4), ("L4",)))
    (row,) = found.rows
    assert not row.carries and row.gpus == 0
    assert "fit no replica of up to 8× L4" in row.reason
    assert "across nodes are not searched" in row.reason
    assert any("no kind searched carries" in n for n in found.notes)


def test_a_kind_that_misses_the_targets_even_unloaded_says_by_how_much() -> None:
    # 70B on L4s: even int4 over 8 of them reads several ms a token at 300 GB/s each.
    found = fleet(request("llama-3.1-70b", Load(users=1), ("L4",), workload={"tpot_ms": 2}))
    (row,) = found.rows
    assert not row.carries
    assert "meets the targets even unloaded" in row.reason and "TPOT target 2 ms" in row.reason


def test_a_load_past_the_most_gpus_is_said_not_carried_up_to_that_count() -> None:
    found = fleet(request("llama-3.1-8b", Load(request_rate=200.0), ("L4",), max_gpus=4))
    (row,) = found.rows
    assert not row.carries
    assert "cannot carry 200 requests/s at any count up to 4× L4" in row.reason


def test_the_users_own_price_per_kind_replaces_the_catalogs_and_reorders_the_kinds() -> None:
    kinds = ("H100-SXM", "L4")
    catalog_priced = fleet(request("llama-3.1-8b", Load(users=64), kinds))
    for row in catalog_priced.rows:
        table = price(row.gpu)
        assert table is not None and row.price_source == table.text and table.read
        assert row.usd_per_hour == pytest.approx(table.usd_per_hour * row.gpus)
    second = catalog_priced.rows[1].gpu
    own = fleet(request("llama-3.1-8b", Load(users=64), kinds, prices={second: 0.01}))
    first = own.rows[0]
    assert first.gpu == second and first.price_source == "given for this job"
    assert first.usd_per_hour == pytest.approx(0.01 * first.gpus)
    assert first.usd_per_million_output_tokens == pytest.approx(
        first.usd_per_hour / 3600 / first.at_load.throughput_tokens_per_second * 1e6
    )


def test_kinds_rank_by_cost_then_unpriced_then_those_that_cannot_carry_it() -> None:
    # GB300 has no catalog price; T4 cannot hold a 70B model in one node.
    assert price("GB300") is None
    found = fleet(request("llama-3.1-70b", Load(users=16), ("T4", "GB300", "H200", "H100-SXM")))
    order = [r.gpu for r in found.rows]
    assert order[-2:] == ["GB300", "T4"]
    priced = [r.usd_per_hour for r in found.rows[:2]]
    assert None not in priced and priced == sorted(priced)  # type: ignore[type-var]
    assert any(n.startswith("no price for GB300") for n in found.notes)
    assert found.rows[2].carries and found.rows[2].usd_per_hour is None


def test_equal_hourly_costs_are_said_as_a_tie() -> None:
    kinds = ("H100-SXM", "H200")
    first = fleet(request("llama-3.1-8b", Load(users=64), kinds))
    gpus = {r.gpu: r.gpus for r in first.rows}
    tied = fleet(request("llama-3.1-8b", Load(users=64), kinds,
                         prices={k: 6.0 / n for k, n in gpus.items()}))  # fmt: skip
    for row in tied.rows:
        other = next(k for k in kinds if k != row.gpu)
        assert f"ties with {other} at $6.00/hour" in row.notes


def test_the_formats_named_are_the_only_ones_searched() -> None:
    found = fleet(request("llama-3.1-8b", Load(users=64), ("L4", "A100-80GB"),
                          weights="auto", kv_cache="auto"))  # fmt: skip
    for row in found.rows:
        if row.carries:
            assert (row.replica.weights, row.replica.kv_cache) == ("auto", "auto")
            assert row.risk == 0 and row.quality_risk == ""


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-30b-a3b"])
def test_fewest_gpus_first_then_the_least_quality_risk(model: str) -> None:
    # Either model carries 16 users on one H100 in its own 16 bits: no quality risk taken.
    # (A mixture's step rises steeply with the first rows, then flattens: its estimate must
    # not stop at one user and leave only the quantized formats.)
    row = fleet(request(model, Load(users=16), ("H100-SXM",))).rows[0]
    assert row.gpus == 1 and row.risk == 0 and row.replica.weights == "auto"


def test_the_measured_kind_says_its_measurement_beside_the_estimate() -> None:
    c = Configuration(H100.key)
    measured = {c: Measured(0.2, 0.011, 0.012, 900.0, "measured on vllm 0.32 at concurrency 8")}
    req = request("llama-3.1-8b", Load(users=8), ("H100-SXM", "H200"), weights="auto",
                  kv_cache="auto")  # fmt: skip
    req = replace(req, scenario=replace(req.scenario, measured=measured))
    rows = {r.gpu: r for r in fleet(req).rows}
    assert rows["H100-SXM"].replica == c
    assert rows["H100-SXM"].basis == "datasheet, checked by measurement"
    assert any("measured on vllm 0.32" in n and "TPOT p90 12 ms" in n
               for n in rows["H100-SXM"].notes)  # fmt: skip
    assert rows["H200"].basis == "datasheet"


def test_each_kinds_front_is_simulations_no_other_beats_from_one_user_to_its_capacity() -> None:
    req = request("llama-3.1-8b", Load(users=64), ("H100-SXM", "L4"))
    for row in fleet(req).rows:
        points = [(p.per_user_tokens_per_second, p.per_gpu_tokens_per_second) for p in row.front]
        assert len(points) >= 3 and points == sorted(points)
        for i, (x, y) in enumerate(points):  # none beaten on both axes by another
            assert not any(ox >= x and oy >= y for j, (ox, oy) in enumerate(points) if j != i)
        # From one user (the fastest for each) to the capacity (the most per GPU).
        assert row.front[-1].users == 1
        assert max(p.users for p in row.front if p.meets) == row.capacity_users
        for p in (row.front[0], row.front[-1]):  # each point is the engine's own simulation
            again = served_users(req, row.gpu, row.replica, 1, p.users)
            assert p.replica == row.replica.name and p.meets == again.meets
            assert p.per_user_tokens_per_second == 1 / again.tpot_p50
            assert p.per_gpu_tokens_per_second == again.per_gpu
        # The operating point: the fleet at the load, per GPU as in its row's own figures.
        assert row.per_gpu_at_load == row.at_load.throughput_tokens_per_second / row.gpus
        assert row.front[0].per_user_tokens_per_second < row.at_load.per_user_tokens_per_second


def test_power_is_the_datasheets_per_gpu_times_the_gpus_and_a_kind_without_one_says_so() -> None:
    req = request("llama-3.1-8b", Load(request_rate=5.0), ("H100-SXM", "GH200"))
    found = fleet(req)
    rows = {r.gpu: r for r in found.rows}
    h100, gh200 = rows["H100-SXM"], rows["GH200"]
    assert power("GH200") is None and "GH200" in unpowered()
    assert h100.watts == power("H100-SXM").watts * h100.gpus
    assert h100.power_source == power("H100-SXM").source
    # Tokens per joule at the load: the rate's output tokens/s over those watts.
    assert h100.output_tokens_per_joule == pytest.approx(5.0 * 300 / h100.watts)
    assert gh200.carries and gh200.watts is None and gh200.output_tokens_per_joule is None
    assert any("no datasheet power for GH200" in note for note in found.notes)


def test_the_fleet_round_trips_through_its_dict() -> None:
    found = fleet(request("llama-3.1-8b", Load(request_rate=5.0), ("H100-SXM", "T4")))
    data = found.to_dict()
    assert Fleet.from_dict(data) == found
    carried = next(r for r in data["rows"] if r["carries"])
    assert carried["gpus"] == carried["replicas"] * carried["gpus_per_replica"]
    assert carried["headroom_text"].startswith("+") and carried["layout"]


def test_a_load_is_users_or_a_rate_and_a_fleet_needs_a_target() -> None:
    with pytest.raises(ValueError):
        Load()
    with pytest.raises(ValueError):
        Load(request_rate=1.0, users=1)
    with pytest.raises(ValueError):
        Load(users=0)
    no_target = request("llama-3.1-8b", Load(users=1), ("H100-SXM",),
                        workload={"ttft_ms": None, "tpot_ms": None})  # fmt: skip
    with pytest.raises(ValueError, match="needs a target"):
        fleet(no_target)
    assert math.isclose(Load(request_rate=2.5).amount, 2.5)


# -- the command line -------------------------------------------------------------------

FLEET_FLAGS = ["--prompt-tokens", "2000", "--output-tokens", "300", "--ttft-ms", "1000",
               "--tpot-ms", "40"]  # fmt: skip


def test_an_estimate_with_a_load_and_no_gpu_prints_the_fleet_table_alone(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    from profiling import cli

    out = tmp_path / "fleet.json"
    argv = ["estimate", "llama-3.1-8b", *FLEET_FLAGS, "--load-rps", "20", "--fleet-gpus",
            "h100,L4,T4", "--fleet-prices", "L4=0.5", "--json", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "Fleet for 20 requests/s of 2,000 + 300 tokens" in printed
    assert "Deployments (" not in printed  # no --gpu: the table alone
    report = json.loads(out.read_text())
    found = Fleet.from_dict(report["fleet"])
    assert [r.gpu for r in found.rows][-1] == "T4" and not found.rows[-1].carries
    l4 = next(r for r in found.rows if r.gpu == "L4")
    assert l4.price_source == "given for this job"
    for row in found.rows[:2]:
        assert f"{row.gpu:15} {row.gpus:>4}  {row.layout}" in printed
        command = row.command or {}
        assert command.get("text", "").startswith("vllm serve meta-llama/") or command.get(
            "unavailable"
        )
    # The catalog gives the T4 no bf16 peak: the kind runs none of the formats searched,
    # which the table says rather than that nothing fits.
    assert "T4 has no compute for bfloat16" in printed


def test_an_estimate_with_a_gpu_and_a_load_prints_the_table_after_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from profiling import cli

    argv = ["estimate", "llama-3.1-8b", "--gpu", "H100", *FLEET_FLAGS, "--load-users", "64",
            "--fleet-gpus", "H100-SXM", "--gpu-hourly-usd", "2.0"]  # fmt: skip
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.index("Deployments (") < printed.index("Fleet for 64 users")
    assert "given for this job" in printed.split("Fleet for 64 users")[1]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--tpot-ms", "40", "--load-rps", "2", "--load-users", "3"], "not both"),
        (["--load-rps", "2"], "give --ttft-ms or --tpot-ms"),
        (["--tpot-ms", "40", "--load-rps", "2", "--fleet-gpus", "H1000"], "unknown GPU kind"),
        (["--tpot-ms", "40", "--load-rps", "2", "--fleet-prices", "L4=cheap"], "not KIND=USD"),
        (["--tpot-ms", "40", "--load-rps", "0"], "Target load (requests/s) must be a number"),
        (["--tpot-ms", "40", "--load-users", "4", "--fleet-max-gpus", "0"], "Most GPUs of a kind"),
    ],
)
def test_bad_fleet_flags_are_refused_in_words(
    flags: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from profiling import cli

    assert cli.main(["estimate", "llama-3.1-8b", *flags]) == 2
    assert said in capsys.readouterr().err
