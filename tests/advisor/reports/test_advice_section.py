"""The report's advice, predictions and what-if sections, through a CSRF-enforcing client.

The advice comes from a real quick demo profile (run once per session) and from
hand-built `Advice` values for the cases a quick CPU run does not reach.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from advisor.jobs.models import Job
from profiling.profile import Profile
from profiling.technique_kit.advice_results import (
    ESTIMATED,
    MEASURED,
    Advice,
    DecidingNumber,
    Evidence,
    ExpectedEffect,
    MissingExperiment,
    NotRecommended,
    QualityTolerance,
    Recommendation,
)
from tests.advisor.quantdata import quantization_result, with_quantization

pytestmark = pytest.mark.django_db


def page(client: Client, result: dict[str, Any], query: dict[str, str] | None = None) -> str:
    job = Job.objects.create(
        model_source="demo", model_name="demo", state=Job.State.SUCCEEDED, progress=1.0,
        result=result, stated_bottleneck=result["config"]["stated_bottleneck"],
    )  # fmt: skip
    response = client.get(reverse("jobs:detail", args=[job.share_token]), query or {})
    assert response.status_code == 200
    return response.content.decode()


def section(html: str, section_id: str) -> str:
    start = html.index(f'id="{section_id}"')
    return html[start : html.index("</section>", start)]


def advice_of(**changes: Any) -> Advice:
    recommendation = Recommendation(
        technique="quantization",
        setting="int8 weight-only, keep lm_head in float32",
        expected_effect=ExpectedEffect("TPOT 7 → 5.8 ms", []),
        evidence=[Evidence("#memory", "memory.weights_bytes", "weights 8.07 MB in float32")],
        caveats=["quality was not measured"],
        basis=MEASURED,
        serves="generation",
        gain=1.2,
    )
    fields: dict[str, Any] = {
        "basis": MEASURED,
        "bottleneck": "generation",
        "bottleneck_label": "Speed up token generation",
        "summary": "Speed up token generation: decode is 95% of a request's time.",
        "deciding_numbers": [DecidingNumber("decode_share", 0.95, "share", 0.5, "decode's share")],
        "stated_bottleneck": "generation",
        "agrees": True,
        "agreement_note": "the figures agree: decode is 95% of a request's time",
        "recommendations": [recommendation],
        "not_recommended": [],
        "experiments_missing": [],
        "quality_tolerance": QualityTolerance(0.9, 0.05),
    }
    return Advice(**{**fields, **changes})


def with_advice(result: dict[str, Any], advice: Advice) -> dict[str, Any]:
    result["advice"] = advice.to_dict()
    return result


# The advice from a real profile ----------------------------------------------------


def test_the_advice_of_a_real_profile_sits_after_the_verdict(browser, demo_result):
    advice = demo_result["advice"]
    html = page(browser, demo_result)
    assert html.index('id="verdict"') < html.index('id="advice"') < html.index('id="memory"')
    part = section(html, "advice")
    assert escape(advice["bottleneck_label"]) in part
    assert escape(advice["summary"]) in part
    for rec in advice["recommendations"]:
        assert escape(rec["setting"]) in part
        assert escape(rec["expected_effect"]["text"]) in part
    assert part.count('<li class="recommendation') == len(advice["recommendations"])
    assert ('id="advice-none"' in part) == (not advice["recommendations"])
    for refused in advice["not_recommended"]:
        assert escape(refused["why"]) in part
    for missing in advice["experiments_missing"]:
        assert escape(missing["note"]) in part
    assert "submit the job again" in part
    # The deciding numbers, with their thresholds, in the report's units.
    assert part.count("<tr><td><abbr") == len(advice["deciding_numbers"])
    assert "decode share" in part and " %<" in part


def test_every_evidence_link_of_a_real_profile_points_at_a_section_on_the_page(
    browser, demo_result
):
    html = page(browser, demo_result)
    for anchor in re.findall(r'<a href="#([\w-]+)"', section(html, "advice")):
        assert f'id="{anchor}"' in html


def test_the_stated_bottleneck_agreeing_is_said(browser, demo_result):
    part = section(page(browser, with_advice(demo_result, advice_of())), "advice")
    assert 'class="agreement agree"' in part
    assert "You and the measurements agree" in part


def test_a_disagreement_is_shown_prominently_with_why(browser, demo_result):
    advice = advice_of(
        stated_bottleneck="memory",
        agrees=False,
        agreement_note="the figures point elsewhere: decode is 95% of a request's time; "
        "weights + KV cache fit on 1× H100-SXM with 71.0 GB to spare",
    )
    part = section(page(browser, with_advice(demo_result, advice)), "advice")
    assert 'class="agreement disagree"' in part
    assert "The measurements disagree with you" in part
    assert "Save model memory" in part  # what the user wrote down
    assert escape("71.0 GB to spare") in part


def test_an_estimated_recommendation_carries_the_badge(browser, demo_result):
    first = advice_of().recommendations[0]
    first.basis = ESTIMATED
    part = section(page(browser, with_advice(demo_result, advice_of(recommendations=[first]))),
                   "advice")  # fmt: skip
    assert 'class="recommendation estimated"' in part
    assert '<span class="badge estimated"' in part


def test_a_measured_recommendation_has_no_estimated_badge(browser, demo_result):
    part = section(page(browser, with_advice(demo_result, advice_of())), "advice")
    assert "badge estimated" not in part


def test_a_technique_not_recommended_says_why(browser, demo_result):
    refused = NotRecommended("speculative", "the draft is accepted 31 % of the time: 0.8× slower",
                             "speculative.sweeps[0]")  # fmt: skip
    advice = advice_of(
        not_recommended=[refused],
        experiments_missing=[MissingExperiment("caching", "not judged", "not run in this job")],
    )
    part = section(page(browser, with_advice(demo_result, advice)), "advice")
    assert "Speculative decoding:</strong> the draft is accepted 31 % of the time" in part
    assert "speculative.sweeps[0]" in part
    assert 'Prefix caching</strong> <span class="flag">not judged</span>' in part


def test_an_inconclusive_effect_is_considered_first_and_a_win_shows_its_confidence(
    browser, demo_result
):
    refused = NotRecommended("quantization", "int4 is not available here", "quantization")
    noisy = NotRecommended("speculative", "best speedup 1.30× (95 % interval 0.70–2.10×)",
                           "speculative.sweeps[1]", inconclusive=True)  # fmt: skip
    win = advice_of().recommendations[0]
    win.confidence = "measured: 95 % interval 1.12–1.31× over 5 repeats"
    advice = advice_of(recommendations=[win], not_recommended=[refused, noisy])
    part = section(page(browser, with_advice(demo_result, advice)), "advice")
    assert "Confidence: measured: 95 % interval 1.12–1.31× over 5 repeats" in part
    considered = part.split("Considered, and why not")[1]
    assert considered.index("1.30×") < considered.index("int4 is not available")
    assert (
        '<span class="flag" title="measured, but its interval includes no change">'
        "inconclusive</span>" in considered
    )


def test_evidence_links_only_to_sections_on_the_page(browser, demo_result):
    first = advice_of().recommendations[0]
    first.evidence = [
        Evidence("#memory", "memory.weights_bytes", "weights 8.07 MB"),
        Evidence("#quantization", "quantization.variants[1]", "top-1 agreement 99 %"),
        Evidence('#caching"><script>', "caching.x", "<b>bold</b>"),
    ]
    html = page(browser, with_advice(demo_result, advice_of(recommendations=[first])))
    part = section(html, "advice")
    assert 'id="quantization"' not in html  # no quantization experiment ran
    assert '<a href="#memory">weights 8.07 MB</a>' in part
    assert 'href="#quantization"' not in part
    assert "top-1 agreement 99 % <code>quantization.variants[1]</code>" in part
    assert "<script>" not in part and "<b>bold</b>" not in part
    assert escape("<b>bold</b>") in part


def test_evidence_links_to_an_experiments_section_when_it_ran(browser, demo_result):
    first = advice_of().recommendations[0]
    first.evidence = [Evidence("#quantization", "quantization.variants[1]", "int8 agrees 99 %")]
    result = with_quantization(demo_result, quantization_result())
    html = page(browser, with_advice(result, advice_of(recommendations=[first])))
    assert 'id="quantization"' in html
    assert '<a href="#quantization">int8 agrees 99 %</a>' in section(html, "advice")


def test_a_result_without_advice_shows_the_empty_state(browser, demo_result):
    del demo_result["advice"], demo_result["predictions"], demo_result["model"]["shapes"]
    html = page(browser, demo_result)
    assert 'id="advice-empty"' in html and "written before the advisor gave advice" in html
    assert 'id="predictions-empty"' in html
    assert 'id="verdict"' in html and 'id="what-if"' in html


# Predictions -------------------------------------------------------------------------


def test_predictions_sit_beside_measurements_with_their_error(browser, demo_result):
    points = demo_result["predictions"]
    html = page(browser, demo_result)
    part = section(html, "predictions")
    assert part.count('<tr class="prediction') == len(points)
    for p in points:
        if p["error"] is not None:
            assert f"{p['error']:+.1%}".replace("%", " %") in part
    bands = re.findall(r'class="num err-(good|fair|poor)"', part)
    assert len(bands) == sum(p["error"] is not None for p in points)
    calibrated = sorted(abs(p["error"]) for p in points if p["basis"] == "calibrated")
    assert calibrated and "How far to trust the projections" in part
    assert '<script id="chart-predictions" type="application/json">' in html


def test_the_predictions_chart_is_log_log_with_the_exact_line(demo_result):
    from advisor.reports.charts import predictions_chart

    figure = predictions_chart(Profile.from_dict(demo_result).predictions or [])
    assert figure is not None
    assert figure["layout"]["xaxis"]["type"] == figure["layout"]["yaxis"]["type"] == "log"
    *points, exact = figure["data"]
    assert exact["x"] == exact["y"] and exact["name"] == "exact (y = x)"
    timed = [p for p in demo_result["predictions"] if p["unit"] == "s" and p["measured"]]
    assert sum(len(t["x"]) for t in points) == len(timed)
    assert predictions_chart([]) is None


def test_an_error_is_coloured_by_its_size(browser, demo_result):
    for p, error in zip(demo_result["predictions"], (0.05, -0.2, 0.6), strict=False):
        p["error"] = error
    part = section(page(browser, demo_result), "predictions")
    assert '<td class="num err-good">+5.0 %</td>' in part
    assert '<td class="num err-fair">-20.0 %</td>' in part
    assert '<td class="num err-poor">+60.0 %</td>' in part


# What if -----------------------------------------------------------------------------


def whatif(**values: Any) -> dict[str, str]:
    base = {"gpu_kind": "H100-SXM", "gpu_count": 1, "concurrency": 8, "prompt_tokens": 512,
            "output_tokens": 128, "dtype": "bfloat16"}  # fmt: skip
    return {f"whatif-{k}": str(v) for k, v in {**base, **values}.items()}


def figures(html: str) -> dict[str, str]:
    """The what-if column of the projected figures, by name."""
    table = section(html, "what-if").split('id="what-if-figures"')[1].split("</table>")[0]
    rows = re.findall(r"<tr><td>([^<]+)</td><td class=\"num\">[^<]*</td>"
                      r"<td class=\"num\"><strong>([^<]+)</strong>", table)  # fmt: skip
    return dict(rows)


def test_a_plain_visit_shows_the_form_with_the_jobs_values_and_no_panel(browser, demo_result):
    part = section(page(browser, demo_result), "what-if")
    assert 'method="get"' in part
    assert 'name="whatif-concurrency" value="8"' in part
    assert '<option value="H100-SXM" selected>' in part
    assert 'id="what-if-panel"' not in part


def test_more_gpus_or_more_requests_change_the_projection(browser, demo_result):
    one = figures(page(browser, demo_result, whatif()))
    two = figures(page(browser, demo_result, whatif(gpu_count=2)))
    busy = figures(page(browser, demo_result, whatif(concurrency=64)))
    assert one["Time to first token, p50"] != two["Time to first token, p50"]
    assert one["Time per output token, p50"] != two["Time per output token, p50"]
    assert one["Usable memory"] != two["Usable memory"]
    assert one["KV cache (all requests)"] != busy["KV cache (all requests)"]
    assert one["Output throughput (all requests)"] != busy["Output throughput (all requests)"]
    assert one["Time to first token, p99"] != busy["Time to first token, p99"]


def test_the_submitted_column_is_the_librarys_own_projection(browser, demo_result):
    from profiling.units import ms, tok_s

    html = page(browser, demo_result, whatif(concurrency=64))
    table = section(html, "what-if").split('id="what-if-figures"')[1].split("</table>")[0]
    # The library's projection of today (the stored predictions are the library's of the
    # day the fixture was made).
    from profiling.advice.build import profile_predictions
    from profiling.profile import Profile

    profile = Profile.from_dict(demo_result)
    on_h100 = {p.metric: p.predicted for p in profile_predictions(profile, profile.model.shapes)
               if p.at.get("device") == "1× H100-SXM"}  # fmt: skip
    p50 = ms(on_h100["ttft_seconds"])
    assert f'<td>Time to first token, p50</td><td class="num">{p50}<' in table
    p99 = ms(on_h100["ttft_p99_seconds"])
    assert f'<td>Time to first token, p99</td><td class="num">{p99}<' in table
    throughput = tok_s(on_h100["output_tokens_per_second"])
    assert f'<td>Output throughput (all requests)</td><td class="num">{throughput}<' in table
    assert 'id="what-if-advice"' in html
    assert "The advice changes" in html or "The advice stays the same" in html


def test_another_gpu_is_estimated_from_the_catalog_and_says_so(browser, demo_result):
    part = section(page(browser, demo_result, whatif(gpu_kind="A100-80GB")), "what-if")
    assert 'id="what-if-panel"' in part
    assert "<strong>Estimated</strong> from the catalog" in part
    assert "assumed, not measured" in part
    assert "(assumed)" in part  # the rates row
    assert 'id="what-if-advice"' in part


def test_the_profiles_own_device_is_calibrated_from_its_measurements(browser, demo_result):
    part = section(page(browser, demo_result, whatif(gpu_kind="", dtype="float32")), "what-if")
    assert "<strong>Calibrated</strong> on the device this profile ran on" in part
    assert re.search(r"fitted to \d+ prefill and \d+ decode points on ", part)
    assert "not a catalog GPU" in part  # a CPU: no fit judged, no advice re-run


def test_an_invalid_value_is_shown_next_to_its_field(browser, demo_result):
    part = section(page(browser, demo_result, whatif(gpu_count=0, concurrency="many")), "what-if")
    gpu_count = part.split('id="field-whatif-gpu_count"')[1].split("</div>")[0]
    assert "greater than or equal to 1" in gpu_count
    concurrency = part.split('id="field-whatif-concurrency"')[1].split("</div>")[0]
    assert "Enter a whole number" in concurrency
    assert 'id="what-if-panel"' not in part


def test_every_catalog_gpu_at_the_limits_renders_a_panel(browser, demo_result):
    from profiling.measure import hardware

    for kind in hardware.catalog():
        query = whatif(gpu_kind=kind, gpu_count=1024, concurrency=4096, prompt_tokens=1_048_576,
                       output_tokens=131_072, dtype="float16")  # fmt: skip
        part = section(page(browser, demo_result, query), "what-if")
        assert 'id="what-if-panel"' in part or 'id="what-if-error"' in part, kind


def test_a_script_in_the_query_is_escaped(browser, demo_result):
    evil = "<script>alert(1)</script>"
    html = page(browser, demo_result, {**whatif(gpu_kind=evil, prompt_tokens=evil), "x": evil})
    assert evil not in html
    part = section(html, "what-if")
    assert "Select a valid choice" in part
    assert escape(evil) in part


def test_an_older_result_is_projected_from_its_model_summary(browser, demo_result):
    del demo_result["advice"], demo_result["predictions"], demo_result["model"]["shapes"]
    part = section(page(browser, demo_result, whatif(gpu_count=2)), "what-if")
    assert 'id="what-if-panel"' in part
    assert "rebuilt from the model summary of an older result" in part


def test_a_result_without_measured_points_cannot_be_projected_and_says_so(browser, demo_result):
    demo_result["prefill"], demo_result["decode"] = [], []
    part = section(page(browser, demo_result, whatif(gpu_kind="")), "what-if")
    assert 'id="what-if-error"' in part and "cannot be projected" in part


def test_a_serving_precision_and_an_fp8_kv_cache_can_be_asked(browser, demo_result):
    bf16 = figures(page(browser, demo_result, whatif()))
    fp8_page = page(browser, demo_result, whatif(dtype="fp8"))
    fp8 = figures(fp8_page)
    assert fp8["Weights"] != bf16["Weights"]
    # The demo's steps are per-pass cost, not bytes: its TPOT hardly moves, but the
    # step model runs at the format's own peak and unpacks its weights.
    assert "fp8 weights and activations at its 1,979 TFLOP/s peak" in section(fp8_page, "what-if")
    tpots = [x["Time per output token, p50"].split() for x in (fp8, bf16)]
    assert tpots[0][1] == tpots[1][1] and float(tpots[0][0]) <= float(tpots[1][0])
    kv = figures(page(browser, demo_result, whatif(kv_dtype="float8")))
    assert kv["Weights"] == bf16["Weights"]
    assert kv["KV cache (all requests)"] != bf16["KV cache (all requests)"]
    # A device without the format says so instead of projecting it.
    part = section(page(browser, demo_result, whatif(gpu_kind="A100-80GB", dtype="fp8")), "what-if")
    assert 'id="what-if-error"' in part and "does not run fp8" in part


def test_the_what_if_estimates_speculation_at_the_acceptance_given(browser, demo_result):
    from advisor.reports import whatif as projection

    html = page(browser, demo_result, whatif(spec_acceptance=0.9))
    assert "draft acceptance 0.9" in section(html, "what-if")
    profile = Profile.from_dict(demo_result)
    scenario = dataclasses.replace(projection.initial(profile), gpu_kind="H100-SXM",
                                   dtype="bfloat16", concurrency=1)  # fmt: skip
    outcome = projection.run(profile, dataclasses.replace(scenario, spec_acceptance=0.9))
    # The demo's passes are all per-pass floor, so a draft head's passes cost what the
    # target's do: judged, at the acceptance given, and not worth it.
    (refused,) = [n for n in outcome.advice.not_recommended if n.technique == "speculative"]
    assert "for your acceptance of 0.90: verifying K + 1 tokens per row costs" in refused.why


def test_the_what_if_starts_from_the_acceptance_the_job_measured(spec_result):
    from advisor.reports import whatif as projection

    profile = Profile.from_dict(spec_result)
    fastest = max(profile.experiments.speculative.sweeps, key=lambda p: p.speedup)
    assert projection.initial(profile).spec_acceptance == round(fastest.acceptance_rate, 2)
