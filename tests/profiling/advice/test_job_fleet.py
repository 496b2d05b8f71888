"""A job's fleet (`profiling.advice.fleet`): sized for the job's target load after its
measurements, stored in the result as `fleet`, each carried row with its launch command."""

from __future__ import annotations

import copy

import pytest

from profiling.cli import readable
from profiling.config import ProfileConfig
from profiling.profile import Profile
from profiling.runner import attach_fleet

pytestmark = [pytest.mark.model]


def with_load(real: Profile, **load: float) -> Profile:
    profile = Profile.from_dict(copy.deepcopy(real.to_dict()))
    profile.config.workload.tpot_ms = 50.0
    for name, value in load.items():
        setattr(profile.config, name, value)
    return profile


def test_a_job_with_a_target_load_stores_every_kind_sized_with_its_command(real, shapes):
    profile = with_load(real, load_rps=5.0)
    attach_fleet(profile, shapes)
    fleet = profile.fleet
    assert fleet is not None and fleet["load"] == {"request_rate": 5.0, "users": None}
    carried = [row for row in fleet["rows"] if row["carries"]]
    assert carried and all(row["basis"] == "datasheet" for row in fleet["rows"])
    for row in carried:
        assert row["gpus"] == row["replicas"] * row["gpus_per_replica"]
        assert row["command"]["text"].startswith("vllm serve demo")
    assert not [w for w in profile.warnings if "fleet" in w]
    again = Profile.from_dict(profile.to_dict())
    assert again.fleet == fleet
    # `profile --load-rps` prints the table after the rest, as `estimate` does.
    assert "Fleet for 5 requests/s of 512 + 128 tokens" in readable(profile)


def test_a_users_load_is_sized_in_users(real, shapes):
    profile = with_load(real, load_users=40)
    attach_fleet(profile, shapes)
    assert profile.fleet["load"] == {"request_rate": None, "users": 40}


def test_the_job_price_prices_its_own_kind(real, shapes):
    profile = with_load(real, load_rps=5.0)
    profile.config.hardware.gpu_hourly_usd = 1.0
    attach_fleet(profile, shapes)
    own = next(r for r in profile.fleet["rows"] if r["gpu"] == "H100-SXM")
    assert own["usd_per_hour"] == pytest.approx(own["gpus"] * 1.0)


def test_without_a_load_there_is_no_fleet(real, shapes):
    profile = with_load(real)
    attach_fleet(profile, shapes)
    assert profile.fleet is None and real.fleet is None


def test_a_load_needs_a_target_and_only_one_kind_of_load():
    from profiling.config import ConfigError

    with pytest.raises(ConfigError, match="TTFT or a TPOT"):
        ProfileConfig(model="demo", load_rps=2.0).validate()
    config = ProfileConfig(model="demo", load_rps=2.0, load_users=4)
    config.workload.ttft_ms = 500.0
    with pytest.raises(ConfigError, match="not both"):
        config.validate()
