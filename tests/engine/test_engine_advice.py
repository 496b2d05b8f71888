"""The engine's figures as advice, on a real stored engine profile with its effects changed.

The stored profile (`tests/advisor/fixtures/cli_engine.json`) is the demo model on
vLLM on two CPU cores; each test sets one effect (a speculative speedup and its
interval, a failed start) and checks the judgement the advice makes of it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from profiling.advice.build import advise_profile, facts_of
from profiling.engine.advice import engine_outcomes, recommended_flags
from profiling.profile import Profile
from profiling.quantization.tolerance import DEFAULT_TOLERANCE
from profiling.technique_kit.advice_results import NotRecommended, Recommendation

STORED = json.loads(
    (Path(__file__).parents[1] / "advisor" / "fixtures" / "cli_engine.json").read_text()
)


@pytest.fixture
def profile() -> Profile:
    return Profile.from_dict(copy.deepcopy(STORED))


def outcomes(profile: Profile, technique: str) -> list:
    facts = facts_of(profile, profile.model.shapes)
    return engine_outcomes(profile.engine, facts, DEFAULT_TOLERANCE).get(technique, [])


def test_a_clear_speculative_win_at_the_users_concurrency_is_recommended_with_its_flags(
    profile,
):
    point = profile.engine.speculative[1]  # the draft model
    point.speedup_at_concurrency, point.interval_at_concurrency = 1.6, (1.3, 1.9)
    judged = outcomes(profile, "speculative")
    [rec] = [o for o in judged if isinstance(o, Recommendation)]
    [other] = [o for o in judged if not isinstance(o, Recommendation)]
    assert other.key == "engine.speculative[0]" and "worse than without" in other.why
    assert rec.setting.startswith("vllm --speculative-config ")
    assert rec.gain_low == 1.3 and rec.basis == "measured"
    served = next(p for p in point.points if p.concurrency == profile.config.workload.concurrency)
    [change] = rec.expected_effect.changes
    assert (change.before, change.after) == (profile.verdict.tpot_ms, served.tpot_ms.p50)
    assert recommended_flags(profile.engine, [rec]) == point.flags


def test_a_slowdown_and_an_interval_holding_one_are_never_ranked(profile):
    judged = outcomes(profile, "speculative")  # as measured: both slower at concurrency 4
    assert judged and not any(isinstance(o, Recommendation) for o in judged)
    assert {o.key for o in judged} == {"engine.speculative[0]", "engine.speculative[1]"}
    for point in profile.engine.speculative:
        point.speedup_at_concurrency, point.interval_at_concurrency = 1.1, (0.9, 1.3)
    whys = outcomes(profile, "speculative")
    assert len(whys) == 2
    assert all(isinstance(w, NotRecommended) and w.inconclusive for w in whys)


def test_output_that_differs_from_the_plain_server_is_refused(profile):
    for point in profile.engine.speculative:
        point.output_matches = False
    judged = outcomes(profile, "speculative")
    assert len(judged) == 2 and all("greedy output differed" in o.why for o in judged)


def test_a_failed_start_is_set_aside_with_the_engines_reason(profile):
    whys = [o.why for o in outcomes(profile, "quantization")]
    assert any("fp8-kv on vllm: engine failed: NotImplementedError" in w for w in whys)


def test_caching_keeps_the_report_figure_as_its_after(profile):
    [rec] = outcomes(profile, "caching")
    assert rec.already_on
    [change] = rec.expected_effect.changes
    assert change.after == profile.verdict.ttft_ms
    assert change.before == profile.engine.prefix_caching.ttft_ms.off.p50


def test_without_an_engine_point_at_the_users_concurrency_the_eager_advice_stands(profile):
    profile.engine.serving = [p for p in profile.engine.serving if p.concurrency == 1]
    assert outcomes(profile, "speculative") == []
    advice = advise_profile(profile, profile.model.shapes)
    assert not any("measured at your workload" in n for n in advice.notes)
