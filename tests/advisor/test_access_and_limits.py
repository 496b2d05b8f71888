"""Who may create jobs and how often: one token on every path, limits in the shared cache."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from advisor.jobs.models import Job
from advisor.jobs.ownership import SESSION_KEY
from tests.advisor.formdata import demo_form
from tests.advisor.jobs.test_submit_command import run
from tests.advisor.pages import csrf_token

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "a-long-site-token-0123456789"


def form_post(client: Client, **extra: str):
    data = {**demo_form(), "csrfmiddlewaretoken": csrf_token(client), **extra}
    return client.post("/", data)


def api_post(client: Client, body: dict, **headers: str):
    return client.post(
        "/api/v1/jobs", json.dumps(body), content_type="application/json", headers=headers
    )


def test_with_a_token_set_the_form_asks_for_it_once_per_session(settings, cpu_worker, redis_url):
    settings.ADVISOR_API_TOKEN = TOKEN
    browser = Client(enforce_csrf_checks=True)
    assert "Access token" in browser.get("/").content.decode()
    refused = form_post(browser)
    assert refused.status_code == 200 and "This field is required" in refused.content.decode()
    wrong = form_post(browser, **{"access-access_token": "guess"})
    assert "not this site" in wrong.content.decode()
    assert not Job.objects.exists()
    assert form_post(browser, **{"access-access_token": TOKEN}).status_code == 302
    assert "Access token" not in browser.get("/").content.decode()  # remembered
    assert form_post(browser).status_code == 302
    assert Job.objects.count() == 2


def test_with_a_token_set_submit_job_needs_it(settings, cpu_worker, redis_url):
    settings.ADVISOR_API_TOKEN = TOKEN
    out, error = run("--no-wait", "--token", "guess")
    assert error is not None and error.returncode == 2 and "--token" in str(error)
    out, error = run("--no-wait", "--token", TOKEN)
    assert error is None and "submitted:" in out


def test_submit_job_applies_the_apis_strict_checks(cpu_worker):
    out, error = run("--no-wait", "--notes", "half a pair \ud800")
    assert error is not None and error.returncode == 2
    assert "--notes" in str(error) and "lone surrogate" in str(error)


def test_submissions_over_the_rate_answer_429_with_retry_after(
    settings, cpu_worker, redis_url, rate_clock_stopped
):
    settings.ADVISOR_SUBMIT_RATE = "2/h"
    for _ in range(2):
        assert api_post(Client(), {}).status_code == 201
    over = api_post(Client(), {})
    assert over.status_code == 429 and over.json()["error"].startswith("Too many jobs")
    assert 1 <= int(over["Retry-After"]) <= 3600
    browser = Client(enforce_csrf_checks=True)  # the form counts against the same address
    refused = form_post(browser)
    assert refused.status_code == 429 and refused["Retry-After"]
    assert Job.objects.count() == 2
    elsewhere = Client(REMOTE_ADDR="10.9.8.7")
    assert api_post(elsewhere, {}).status_code == 201


@pytest.mark.postgres
def test_the_job_list_does_not_load_stored_results():
    jobs = [Job.objects.create(model_name="demo", result={"big": "x" * 1000}) for _ in range(3)]
    client = Client()
    session = client.session
    session[SESSION_KEY] = [job.share_token for job in jobs]
    session.save()
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/jobs/")
    assert response.status_code == 200 and response.content.count(b"/jobs/") >= 3
    job_queries = [q["sql"] for q in queries if 'FROM "jobs_job"' in q["sql"]]
    loaded = [sql for sql in job_queries if '"result"' in sql]
    assert job_queries and not loaded, loaded
