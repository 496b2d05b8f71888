"""Escaping, CSRF, unknown tokens and hostile input: never a script, never a 500."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from advisor.jobs.models import Job
from advisor.jobs.ownership import SESSION_KEY
from tests.advisor.pages import csrf_token, form_data, make_job, own
from tests.advisor.reports.test_charts import real_demo_profile

pytestmark = pytest.mark.django_db

PAYLOAD = "<script>alert('owned')</script>"
CLOSE_PAYLOAD = "</script><script>alert('owned')</script>"
ESCAPED = "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;"


@pytest.fixture
def model_root(tmp_path: Path, settings) -> Path:
    root = tmp_path / "models"
    root.mkdir()
    settings.ADVISOR_MODEL_ROOTS = [str(root)]
    return root


def assert_no_script(html: str) -> None:
    """No payload parsed as markup (escaped copies, inside JSON or as entities, are fine)."""
    assert "<script>alert" not in html
    assert "</script><script>" not in html


# Escaping -----------------------------------------------------------------------


def test_notes_and_model_names_are_escaped_on_the_job_page_and_list(browser):
    job = make_job(model_name=PAYLOAD, notes=PAYLOAD, state=Job.State.RUNNING, message=PAYLOAD)
    own(browser, job)
    for url in (reverse("jobs:detail", args=[job.share_token]), reverse("jobs:list")):
        html = browser.get(url).content.decode()
        assert_no_script(html)
        assert ESCAPED in html


def test_a_failure_reason_is_escaped(browser):
    job = make_job(state=Job.State.FAILED, error=PAYLOAD)
    html = browser.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    assert_no_script(html)
    assert ESCAPED in html


def test_strings_inside_a_result_cannot_break_out_of_the_page(browser):
    result: dict[str, Any] = real_demo_profile()
    result["model"]["name"] = CLOSE_PAYLOAD
    result["environment"]["hostname"] = CLOSE_PAYLOAD
    result["warnings"].append(CLOSE_PAYLOAD)
    result["memory"]["fit"]["gpu_kind"] = CLOSE_PAYLOAD  # reaches a chart title
    job = make_job(state=Job.State.SUCCEEDED, result=result, notes=CLOSE_PAYLOAD)
    html = browser.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    assert_no_script(html)
    assert "\\u003C/script\\u003E" in html  # the chart's copy, inside json_script


def test_submitted_notes_are_stored_as_typed_and_shown_escaped(browser, cpu_worker):
    token = csrf_token(browser)
    browser.post("/", {**form_data(notes=PAYLOAD), "csrfmiddlewaretoken": token})
    job = Job.objects.get()
    assert job.notes == PAYLOAD
    html = browser.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    assert_no_script(html)


# CSRF and access ----------------------------------------------------------------


def test_csrf_is_enforced_on_every_post(browser, cpu_worker):
    job = make_job()
    own(browser, job)
    assert browser.post("/", form_data()).status_code == 403
    assert browser.post(reverse("jobs:cancel", args=[job.share_token])).status_code == 403
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED and not Job.objects.exclude(pk=job.pk).exists()


@pytest.mark.parametrize(
    "token", ["nope", "x" * 5000, "ü-nicode", "' OR 1=1 --", "..", "%00", "AAAAAAAAAAAAAAAAAAAAAA"]
)
@pytest.mark.parametrize("name", ["jobs:detail", "jobs:status", "jobs:result-json"])
def test_unknown_tokens_are_404(browser, name, token):
    make_job()
    assert browser.get(reverse(name, args=[token])).status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/jobs/../../etc/passwd",
        "/jobs/%2e%2e%2fetc/",
        "/jobs/a/b/c/",
        "/jobs/%00/",
        "/jobs/a%00b/status",
    ],
)
def test_paths_that_try_to_climb_are_404(browser, path):
    assert browser.get(path).status_code == 404


def test_cancelling_an_unknown_token_is_404(browser):
    token = csrf_token(browser)
    response = browser.post(reverse("jobs:cancel", args=["nope"]), {"csrfmiddlewaretoken": token})
    assert response.status_code == 404


@pytest.mark.parametrize("value", ["not-a-list", [1, 2, None], {"a": 1}, None])
def test_a_tampered_session_does_not_break_pages(browser, value):
    session = browser.session
    session[SESSION_KEY] = value
    session.save()
    assert browser.get(reverse("jobs:list")).status_code == 200
    job = make_job()
    page = browser.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    assert 'id="cancel-job"' not in page


# Hostile form input ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"prompt_tokens": "9" * 5000}, "prompt_tokens"),
        ({"concurrency": "99999999999999999999"}, "concurrency"),
        ({"output_tokens": "-128"}, "output_tokens"),
        ({"gpu_count": "-1"}, "gpu_count"),
        ({"prompt_tokens": "five hundred"}, "prompt_tokens"),
        ({"ttft_ms": "1e999"}, "ttft_ms"),
        ({"tpot_ms": "-inf"}, "tpot_ms"),
        ({"shared_prefix_tokens": "0x10"}, "shared_prefix_tokens"),
        ({"model_source": "hub", "model_name": "../../etc/passwd"}, "model_name"),
        ({"model_source": "hub", "model_name": "/etc/passwd"}, "model_name"),
        ({"model_source": "local", "model_name": "/etc"}, "model_name"),
        ({"model_source": "local", "model_name": "../../etc/passwd"}, "model_name"),
        ({"model_source": "local", "model_name": "/models/x\x00y"}, "model_name"),
        ({"model_source": "config", "model_name": "~/secrets"}, "model_name"),
        ({"model_name": "d" * 10_000}, "model_name"),
        ({"notes": "n" * 100_000}, "notes"),
        ({"gpu_kind": "<script>"}, "gpu_kind"),
        ({"stated_bottleneck": ""}, "stated_bottleneck"),
    ],
)
def test_bad_input_is_a_field_error_never_a_500(browser, cpu_worker, model_root, changes, field):
    token = csrf_token(browser)
    response = browser.post("/", {**form_data(**changes), "csrfmiddlewaretoken": token})
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert not Job.objects.exists()


def test_a_symlink_inside_the_roots_that_points_outside_is_refused(
    browser, cpu_worker, model_root, tmp_path
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (model_root / "link").symlink_to(outside)
    token = csrf_token(browser)
    data = form_data(model_source="local", model_name=str(model_root / "link"))
    response = browser.post("/", {**data, "csrfmiddlewaretoken": token})
    assert response.status_code == 200
    assert "only be loaded from under" in response.context["form"].errors["model_name"][0]


def test_a_symlink_loop_is_an_error_not_a_crash(browser, cpu_worker, model_root):
    (model_root / "a").symlink_to(model_root / "b")
    (model_root / "b").symlink_to(model_root / "a")
    token = csrf_token(browser)
    data = form_data(model_source="local", model_name=str(model_root / "a"))
    response = browser.post("/", {**data, "csrfmiddlewaretoken": token})
    assert response.status_code == 200
    assert "model_name" in response.context["form"].errors


def test_a_post_with_missing_fields_is_a_form_error(browser, cpu_worker):
    token = csrf_token(browser)
    response = browser.post("/", {"csrfmiddlewaretoken": token})
    assert response.status_code == 200
    assert "model_name" in response.context["form"].errors
