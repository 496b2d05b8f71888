"""Speculative decoding in an estimate: a draft head on the target's shapes, at the
acceptance the user gives or over the stated range, judged at the user's load."""

from __future__ import annotations

import pytest

from profiling.advice.build import estimate_report
from profiling.config import Workload
from profiling.measure.hardware import lookup
from profiling.model.shapes import Shapes
from profiling.projection.calibration import assumed
from profiling.projection.estimate import shipped_configs
from profiling.projection.step_time import StepModel
from profiling.speculative.estimate_advice import (
    ASSUMED_ACCEPTANCE,
    speedup,
    tokens_per_pass,
)

H100 = lookup("H100")


def shapes(name: str) -> Shapes:
    return Shapes.from_config(shipped_configs()[name])


def spec(name: str, users: int, gpus: int = 1, acceptance: float | None = None):
    work = Workload(prompt_tokens=512, output_tokens=128, concurrency=users)
    advice, points = estimate_report(shapes(name), H100, gpus, "bfloat16", work,
                                     spec_acceptance=acceptance)  # fmt: skip
    recs = [r for r in advice.recommendations if r.technique == "speculative"]
    refused = [n for n in advice.not_recommended if n.technique == "speculative"]
    return advice, points, recs, refused


def test_a_pass_emits_the_accepted_run_plus_the_targets_own_token():
    assert tokens_per_pass(0.0, 4) == 1.0
    assert tokens_per_pass(0.5, 1) == pytest.approx(1.5)
    assert tokens_per_pass(0.5, 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert tokens_per_pass(1.0, 3) == 4.0


def test_an_8b_at_one_user_is_offered_a_draft_head_with_its_range_and_tpot():
    advice, points, (rec,), _ = spec("llama-3.1-8b", 1)
    assert rec.basis == "estimated" and rec.setting.startswith("a draft head")
    low, high = ASSUMED_ACCEPTANCE
    assert f"for an acceptance of {low:.1f}–{high:.1f} per drafted token, assumed" in (
        rec.expected_effect.text
    )
    (tpot,) = [p.predicted for p in points if p.metric == "tpot_seconds"]
    (change,) = rec.expected_effect.changes
    assert change.before == pytest.approx(tpot * 1e3)  # the TPOT the page shows
    assert rec.gain == pytest.approx(change.before / change.after)
    missing = {m.technique: m.judged for m in advice.experiments_missing}
    assert missing["speculative"] == "estimated"


def test_the_users_acceptance_replaces_the_range_and_a_low_one_pays_less():
    _, _, (good,), _ = spec("llama-3.1-8b", 1, acceptance=0.9)
    _, _, (poor,), _ = spec("llama-3.1-8b", 1, acceptance=0.3)
    assert "for your acceptance of 0.90" in good.expected_effect.text
    assert good.gain > poor.gain > 1.0


def test_verifying_costs_more_once_the_step_is_compute_bound():
    s = shapes("llama-3.1-8b")
    step = StepModel(s, assumed(H100, "bfloat16", s.num_layers), "bfloat16", "", 1, H100)
    context = 512 + 64
    light = speedup(step, 1, context, 0.65, 3)
    heavy = speedup(step, 512, 512 * context, 0.65, 3)
    assert heavy < light
    # Never more than the tokens a pass emits: a pass costs at least a plain step.
    assert light <= tokens_per_pass(0.65, 3)


def test_a_mixture_at_one_user_is_not_promised_a_gain():
    # Verifying K + 1 tokens routes them to more experts than one token reads.
    _, _, recs, (refused,) = spec("mixtral-8x7b", 1, gpus=2)
    assert not recs
    assert "rests on the acceptance your draft reaches" in refused.why


def test_an_acceptance_outside_zero_to_one_is_refused(capsys):
    from profiling import cli

    assert cli.main(["estimate", "llama-3.1-8b", "--gpu", "H100", "--spec-acceptance", "1.5"]) == 2
    assert "--spec-acceptance 1.5: give a share from 0 to below 1" in capsys.readouterr().err


def test_no_speculation_is_promised_on_a_deployment_that_does_not_fit():
    _, _, recs, (refused,) = spec("llama-3.1-70b", 4)  # 131 GiB of bf16 on one 80 GB H100
    assert not recs
    assert refused.why.startswith("set aside while the model does not fit: weights and KV")
