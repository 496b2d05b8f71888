"""Measured figures in the deployment search: a stored engine profile (the demo model on
vLLM, `tests/advisor/fixtures/cli_engine.json`) said to have run on the deployment's GPU
kind, with one effect changed per test; what the job measured replaces the estimate in
that configuration's row only, and a measured quality replaces the stated caveat."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from profiling.advice.build import advise_profile, facts_of
from profiling.advice.deployments import scenario
from profiling.engine.results import EngineQuantization
from profiling.measure import hardware
from profiling.profile import Profile
from profiling.projection.search import cached_tokens, configurations
from tests.profiling.advice_scenarios import add_experiment, quant_variant, quantization_result

STORED = json.loads(
    (Path(__file__).parents[2] / "advisor" / "fixtures" / "cli_engine.json").read_text()
)
H100 = hardware.lookup("H100").key


@pytest.fixture
def data() -> dict[str, Any]:
    out = copy.deepcopy(STORED)
    out["environment"]["gpu_kind"] = H100  # measured on the deployment's kind
    out["config"]["hardware"]["gpu_kind"] = H100
    return out


def rows(profile: Profile) -> dict[str, dict[str, Any]]:
    found = advise_profile(profile, profile.model.shapes).deployments
    assert found is not None
    return {r["name"]: r for r in found["configurations"]}


def test_the_engines_reference_run_is_the_one_gpu_rows_figures(data):
    profile = Profile.from_dict(data)
    w = profile.config.workload
    [point] = [p for p in profile.engine.serving if p.concurrency == w.concurrency]
    row = rows(profile)["TP=1, prefix caching"]
    assert row["basis"] == "measured"
    assert row["tpot_p90_seconds"] == pytest.approx(point.tpot_ms.p90 / 1e3)
    assert row["ttft_p90_seconds"] == pytest.approx(point.ttft_ms.p90 / 1e3)
    assert row["throughput_tokens_per_second"] == point.output_tokens_per_s
    assert any("measured on vllm" in n for n in row["notes"])
    others = [r for name, r in rows(profile).items() if r["basis"] == "estimated"]
    assert others and all(r["basis"] == "estimated" for r in others)


def test_a_run_on_another_gpu_kind_or_at_another_load_is_not_taken_as_measured(data):
    data["environment"]["gpu_kind"] = hardware.lookup("A100").key
    assert all(r["basis"] == "estimated" for r in rows(Profile.from_dict(data)).values())
    data["environment"]["gpu_kind"] = H100
    data["config"]["workload"]["concurrency"] = 2  # the sweep ran 1, 4 and 8
    assert all(r["basis"] == "estimated" for r in rows(Profile.from_dict(data)).values())


def test_a_quantization_the_engine_ran_is_measured_with_its_quality(data):
    profile = Profile.from_dict(data)
    reference = profile.engine.serving
    slower = copy.deepcopy(reference)
    for p in slower:
        p.tpot_ms.p90 *= 0.5  # set: fp8 decodes twice as fast at p90
    profile.engine.quantization = [
        EngineQuantization("fp8", "ran", points=slower, perplexity=12.6,
                           reference_perplexity=12.0, greedy_agreement=0.9)
    ]  # fmt: skip
    row = rows(profile)["TP=1, fp8 weights, prefix caching"]
    w = profile.config.workload
    [point] = [p for p in slower if p.concurrency == w.concurrency]
    assert row["basis"] == "measured"
    assert row["tpot_p90_seconds"] == pytest.approx(point.tpot_ms.p90 / 1e3)
    assert "fp8 measured on vllm: perplexity 12 → 12.6 (+5.0%)" in row["quality_risk"]
    assert "stated" not in row["quality_risk"]


def test_the_quantization_experiments_quality_replaces_the_stated_caveat(data):
    result = quantization_result(
        quant_variant("int4", 2_000_000, 0.004, ppl=21.0, top1=0.93),
        quant_variant("int8", 4_000_000, 0.006, ppl=20.2, top1=0.99),
    )
    add_experiment(data, "quantization", result)
    found = rows(Profile.from_dict(data))
    int4 = [r for name, r in found.items() if "int4 weights" in name]
    int8 = [r for name, r in found.items() if "int8 weights" in name]
    assert int4 or int8
    for r in int4:
        assert (
            "int4 measured by the quantization experiment: perplexity 20 → 21 (+5.0%)"
            in (r["quality_risk"])
        )
    for r in int8:
        assert "top-1 agreement 99.0%" in r["quality_risk"]
        assert "int8 weights: usually close to bf16 (stated" not in r["quality_risk"]


def test_random_weights_give_no_quality_and_the_stated_caveat_stays(data):
    result = quantization_result(quant_variant("int8", 4_000_000, 0.006, ppl=20.2, top1=0.99))
    result.quality_meaningful = False
    add_experiment(data, "quantization", result)
    int8 = [r for name, r in rows(Profile.from_dict(data)).items() if "int8 weights" in name]
    assert int8 and all("int8 weights: usually close to bf16 (stated, not measured)" in
                        r["quality_risk"] for r in int8)  # fmt: skip


def test_the_engines_draft_acceptance_is_what_speculation_is_searched_with(data):
    profile = Profile.from_dict(data)
    facts = facts_of(profile, profile.model.shapes)
    [draft] = [p for p in profile.engine.speculative if p.method == "draft_model"]
    sc = scenario(facts, profile.config.hardware, None, profile.engine)
    assert sc is not None and sc.acceptance == draft.acceptance_rate
    assert sc.acceptance_basis.startswith("measured on vllm") and sc.draft == draft.draft
    assert any(c.draft == draft.draft for c in configurations(sc, 1))
    draft.output_matches = False  # its output differed: no acceptance to trust
    sc = scenario(facts, profile.config.hardware, None, profile.engine)
    assert sc is not None and sc.acceptance is None
    assert not any(c.draft for c in configurations(sc, 1))


def test_the_engines_draft_model_run_is_its_rows_figures_named_by_its_folder(data):
    profile = Profile.from_dict(data)
    [draft] = [p for p in profile.engine.speculative if p.method == "draft_model"]
    name = f"TP=1, draft {Path(draft.draft).name} k={draft.k}, prefix caching"
    row = rows(profile)[name]
    [point] = [p for p in draft.points if p.concurrency == profile.config.workload.concurrency]
    assert row["basis"] == "measured" and row["configuration"]["draft"] == draft.draft
    assert row["tpot_p90_seconds"] == pytest.approx(point.tpot_ms.p90 / 1e3)


def test_the_measured_prefix_hit_rate_sets_the_cached_tokens_of_the_user_prompts_only(data):
    profile = Profile.from_dict(data)
    facts = facts_of(profile, profile.model.shapes)
    w, run = profile.config.workload, profile.engine.prefix_caching
    sc = scenario(facts, profile.config.hardware, None, profile.engine)
    assert sc is not None and sc.prefix_hit_rate == run.hit_rate
    assert cached_tokens(sc) == round(run.hit_rate * w.prompt_tokens) != w.shared_prefix_tokens
    run.shared_prefix_tokens = 128  # measured on other prompts: the shared prefix stands
    sc = scenario(facts, profile.config.hardware, None, profile.engine)
    assert sc is not None and sc.prefix_hit_rate is None
    assert cached_tokens(sc) == w.shared_prefix_tokens
