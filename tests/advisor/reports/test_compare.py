"""The compare page and the two ways to it: a report's "Compare with…" form and the job list.

Both reports are real result shapes: the CLI's caching + parallel run of the
demo model (a stored fixture) and a copy of it with the advice the library
computes and a quantization experiment added.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from django.utils.html import escape

from advisor.jobs.models import Job
from advisor.jobs.ownership import SESSION_KEY
from advisor.reports.compare import figure_row
from profiling.advice.build import advise_profile
from profiling.model.shapes import Shapes
from profiling.profile import Profile
from profiling.units import size
from tests.advisor.quantdata import quantization_result, with_quantization

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parents[1] / "fixtures"
PAYLOAD = "<script>alert('owned')</script>"


def cli_result() -> dict[str, Any]:
    """A real `python -m profiling profile demo --experiments caching,parallel` result."""
    return json.loads((FIXTURES / "cli_caching_parallel.json").read_text())


def with_advice(result: dict[str, Any]) -> dict[str, Any]:
    """`result` with the advice the library derives from it (pure arithmetic, no torch)."""
    model = result["model"]
    shapes = Shapes.from_config({
        "model_type": "llama", "hidden_size": model["hidden_size"],
        "num_hidden_layers": model["num_layers"], "intermediate_size": model["intermediate_size"],
        "num_attention_heads": model["num_attention_heads"],
        "num_key_value_heads": model["num_key_value_heads"], "head_dim": model["head_dim"],
        "vocab_size": model["vocab_size"], "torch_dtype": "float32",
    })  # fmt: skip
    result["advice"] = advise_profile(Profile.from_dict(result), shapes).to_dict()
    return result


def finished(result: dict[str, Any], **fields: Any) -> Job:
    fields = {"model_source": "demo", "model_name": "demo", **fields}
    return Job.objects.create(state=Job.State.SUCCEEDED, progress=1.0, result=result, **fields)


def compare_url(a: Job, b: Job) -> str:
    return reverse("reports:compare", args=[a.share_token, b.share_token])


def row(html: str, label: str) -> str:
    """The table row whose header cell is `label`."""
    start = html.index(f'<th class="sub">{label}</th>')
    return html[start : html.index("</tr>", start)]


@pytest.fixture
def pair() -> tuple[Job, Job]:
    """A: the CLI result; B: the same run with advice, quantization and 2× faster decode."""
    b_result = with_quantization(with_advice(cli_result()), quantization_result())
    for point in b_result["decode"]:
        point["tokens_per_second"] *= 2
        point["seconds_per_token"]["samples"] = [
            t / 2 for t in point["seconds_per_token"]["samples"]
        ]
    a = finished(cli_result(), gpu_kind="", notes="baseline")
    b = finished(b_result, gpu_kind="L4", gpu_count=2)
    return a, b


# The page ------------------------------------------------------------------------


def test_two_finished_reports_show_side_by_side_with_ratios(browser, pair):
    a, b = pair
    response = browser.get(compare_url(a, b))
    assert response.status_code == 200
    html = response.content.decode()
    weights = a.result["memory"]["weights_bytes"]
    assert size(weights) in row(html, "Weights")
    assert "same" in row(html, "Weights")
    assert "L4 × 2" in row(html, "Target GPU") and "any worker" in row(html, "Target GPU")
    measured_on = a.result["environment"]["device_name"]  # the machine that made the fixture
    assert f"{measured_on} (cpu)" in row(html, "Measured on")
    assert "float32" in row(html, "dtype")
    assert "ms" in row(html, "Time to first token")
    decode = row(html, "Decode, batch 4, context 64")
    assert "2.00×" in decode and 'class="better"' in decode and "95 % interval" in decode
    assert "Prefill, batch 1, 128 prompt tokens" in html


def test_the_advice_and_each_experiments_finding_are_compared(browser, pair):
    a, b = pair
    html = browser.get(compare_url(a, b)).content.decode()
    advice = b.result["advice"]
    assert escape(advice["bottleneck_label"]) in row(html, "Bottleneck")
    first = advice["recommendations"][0]
    assert escape(first["setting"]) in row(html, "First recommendation")
    assert escape(a.result["caching"]["finding"]) in row(html, "Prefix caching")
    quantization = row(html, "Quantization")
    assert "not run" in quantization
    assert escape(quantization_result().finding) in quantization


def test_the_combined_chart_has_both_reports_decode_lines(browser, pair):
    a, b = pair
    html = browser.get(compare_url(a, b)).content.decode()
    marker = '<script id="chart-compare-decode" type="application/json">'
    assert marker in html
    figure = json.loads(html.split(marker)[1].split("</script>")[0])
    names = {trace["name"] for trace in figure["data"]}
    assert {"A: context 64", "A: context 256", "B: context 64", "B: context 256"} <= names
    b_64 = next(t for t in figure["data"] if t["name"] == "B: context 64")
    a_64 = next(t for t in figure["data"] if t["name"] == "A: context 64")
    assert b_64["y"] == pytest.approx([2 * y for y in a_64["y"]])


def test_a_running_and_a_failed_job_say_so_in_their_column(browser, pair):
    a, _ = pair
    running = Job.objects.create(
        model_name="demo", state=Job.State.RUNNING, progress=0.42, phase="decode"
    )
    html = browser.get(compare_url(a, running)).content.decode()
    assert "Not finished: running (42%, decode)" in html
    assert "—" in row(html, "Weights")
    assert "not run" not in row(html, "Prefix caching")  # unknown, not "not run"
    assert 'id="chart-compare-decode"' in html  # A's lines alone
    failed = Job.objects.create(model_name="demo", state=Job.State.FAILED, error=PAYLOAD)
    html = browser.get(compare_url(failed, a)).content.decode()
    assert "This job failed" in html
    assert "<script>alert" not in html and escape(PAYLOAD) in html


def test_an_unknown_or_malformed_token_is_a_clear_404(browser, pair):
    a, _ = pair
    response = browser.get(reverse("reports:compare", args=[a.share_token, "nope" * 4]))
    assert response.status_code == 404
    assert "Report B in this compare link does not match any job" in response.content.decode()
    response = browser.get(f"/reports/compare/{'x' * 40}/%00bad/")
    assert response.status_code == 404
    assert "Neither code" in response.content.decode()


def test_text_from_results_is_escaped(browser, pair):
    a, b = pair
    b.model_name = PAYLOAD
    b.result["environment"]["device_name"] = PAYLOAD
    b.save()
    html = browser.get(compare_url(a, b)).content.decode()
    assert "<script>alert" not in html
    assert escape(PAYLOAD) in html


def test_a_figure_row_gives_ratio_difference_and_the_better_side():
    lower = figure_row("TPOT", 40.0, 20.0, str, higher_is_better=False)
    assert (lower.change, lower.better) == ("0.50× (-20.0)", "b")
    unknown = figure_row("TPOT", None, 20.0, lambda v: "—" if v is None else str(v))
    assert (unknown.a, unknown.change, unknown.better) == ("—", "", "")


# Getting there ----------------------------------------------------------------------


def test_the_report_page_has_a_compare_with_form(browser, pair):
    a, _ = pair
    html = browser.get(reverse("jobs:detail", args=[a.share_token])).content.decode()
    form = html[html.index('id="compare-with"') :][:800]
    assert f'name="a" value="{a.share_token}"' in form and 'name="b"' in form


def test_a_pasted_share_link_or_code_leads_to_the_compare_page(browser, pair):
    a, b = pair
    pick = reverse("reports:compare-pick")
    for other in (f"https://advisor.example/jobs/{b.share_token}/", f"  {b.share_token} "):
        response = browser.get(pick, {"a": a.share_token, "b": other})
        assert response.status_code == 302
        assert response["Location"] == compare_url(a, b)


@pytest.mark.parametrize(
    ("other", "message"),
    [
        ("https://advisor.example/jobs/AAAAAAAAAAAAAAAAAAAAAA/", "No report has the code"),
        ("not a link at all", "not a share link"),
        ("", "This field is required"),
    ],
)
def test_a_bad_link_is_an_error_next_to_the_field(browser, pair, other, message):
    a, _ = pair
    response = browser.get(reverse("reports:compare-pick"), {"a": a.share_token, "b": other})
    assert response.status_code == 400
    html = response.content.decode()
    assert message in html[html.index('id="field-b"') :][:1200]


def test_comparing_a_report_with_itself_is_refused(browser, pair):
    a, _ = pair
    response = browser.get(
        reverse("reports:compare-pick"), {"a": a.share_token, "b": a.share_token}
    )
    assert response.status_code == 400
    assert "the same report" in response.content.decode()


def test_two_ticked_jobs_in_the_list_lead_to_the_compare_page(browser, pair):
    a, b = pair
    session = browser.session
    session[SESSION_KEY] = [b.share_token, a.share_token]
    session.save()
    listing = browser.get(reverse("jobs:list")).content.decode()
    assert f'name="pick" value="{a.share_token}"' in listing
    pick = reverse("reports:compare-pick")
    response = browser.get(pick, {"pick": [a.share_token, b.share_token]})
    assert response.status_code == 302 and response["Location"] == compare_url(a, b)
    response = browser.get(pick, {"pick": [a.share_token]})
    assert response.status_code == 400
    assert "Tick exactly two jobs" in response.content.decode()


def test_a_copy_of_a_result_compares_equal(browser, pair):
    a, _ = pair
    twin = finished(copy.deepcopy(a.result))
    html = browser.get(compare_url(a, twin)).content.decode()
    assert 'class="better"' not in html


def test_a_rerun_whose_difference_is_inside_its_repeats_is_within_noise(browser, pair):
    a, _ = pair
    rerun = copy.deepcopy(a.result)
    for point in rerun["decode"]:  # the same repeats in another order, one a little slower
        samples = point["seconds_per_token"]["samples"]
        point["seconds_per_token"]["samples"] = [samples[-1] * 1.03, *samples[:-1]]
        point["tokens_per_second"] *= 0.97
    html = browser.get(compare_url(a, finished(rerun))).content.decode()
    decode = row(html, "Decode, batch 4, context 64")
    assert "within noise" in decode and "95 % interval" in decode
    assert 'class="better"' not in decode


def test_a_figure_row_inside_its_interval_favours_neither_side():
    from profiling.measure.stats import ratio_interval

    noise = ratio_interval([1.0, 1.2, 0.9], [1.1, 0.95, 1.15])
    row = figure_row("Decode", 100.0, 103.0, str, higher_is_better=True, noise=noise)
    assert row.better == "" and "within noise" in row.change
