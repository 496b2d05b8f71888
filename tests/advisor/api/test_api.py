"""The JSON API (/api/v1/) through a CSRF-enforcing client, against a real Redis."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from advisor.celery import app
from advisor.jobs import submission
from advisor.jobs.forms import JobForm
from advisor.jobs.models import Job, Worker
from tests.advisor.formdata import demo_form
from tests.advisor.jobs.test_dispatch import queue_length
from tests.advisor.pages import make_job

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"


@pytest.fixture
def client() -> Client:
    return Client(enforce_csrf_checks=True)


@pytest.fixture
def cpu_worker() -> Worker:
    return Worker.objects.create(name="local@host", host="host", queues=",cpu,default,")


@pytest.fixture
def dead_broker(settings):
    saved = app.conf.broker_url
    settings.ADVISOR_EMBEDDED_REDIS = None
    app.conf.broker_url = "redis+socket:///nonexistent/advisor/redis.sock"
    yield
    app.conf.broker_url = saved


def post(client: Client, body: Any, **headers: str):
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post(JOBS, data, content_type="application/json", headers=headers)


# Submit ------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_valid_job_is_queued_and_published(client, cpu_worker, redis_url):
    before = queue_length(redis_url, "default")
    response = post(client, {"model_name": "demo", "prompt_tokens": 256, "notes": "from a script"})
    assert response.status_code == 201, response.content
    body = response.json()
    job = Job.objects.get()
    assert response["Location"] == f"{JOBS}/{job.share_token}"
    assert (body["token"], body["state"], body["final"]) == (job.share_token, "queued", False)
    assert body["links"]["report"] == f"http://testserver/jobs/{job.share_token}/"
    assert (job.state, job.queue, job.prompt_tokens, job.notes) == (
        Job.State.QUEUED, "default", 256, "from a script",
    )  # fmt: skip
    assert job.dispatched_at is not None
    assert queue_length(redis_url, "default") == before + 1


def test_left_out_fields_take_the_forms_defaults(client, cpu_worker):
    assert post(client, {}).status_code == 201
    job = Job.objects.get()
    assert (job.model_name, job.quick, job.prompt_lookup) == ("demo", True, True)
    assert (job.prompt_tokens, job.output_tokens, job.concurrency) == (512, 128, 8)


@pytest.mark.postgres
def test_experiments_and_lists_are_taken_as_json(client, cpu_worker):
    body = {
        "run_quantization": True, "precisions": ["int8", "fp32"], "quant_variants": ["lm_head"],
        "run_speculative": True, "spec_ks": "4,2", "prompt_lookup": False, "tp_measure": 2,
        "run_parallel": True, "quick": False, "ttft_ms": 250.5,
    }  # fmt: skip
    assert post(client, body).status_code == 201
    job = Job.objects.get()
    chosen = (job.precisions, job.quant_variants, job.spec_ks)
    assert chosen == (["fp32", "int8"], ["lm_head"], [2, 4])
    assert job.origin == Job.Origin.API  # listed under Recent jobs as the API's
    assert (job.run_quantization, job.run_speculative, job.run_parallel) == (True, True, True)
    assert (job.quick, job.prompt_lookup, job.tp_measure, job.ttft_ms) == (False, False, 2, 250.5)


def test_invalid_fields_are_400_with_the_forms_messages(client, cpu_worker):
    bad = {"prompt_tokens": 0, "model_name": "demo-nope", "run_quantization": True,
           "precisions": ["fp32"]}  # fmt: skip
    response = post(client, bad)
    assert response.status_code == 400
    errors = response.json()["errors"]
    form = JobForm(data={**submission.defaults(), **bad})
    assert not form.is_valid()
    assert errors == {name: list(messages) for name, messages in form.errors.items()}
    assert set(errors) == {"prompt_tokens", "model_name", "precisions"}
    assert "greater than or equal to 1" in errors["prompt_tokens"][0]
    assert not Job.objects.exists()


def test_an_unserved_target_is_refused_as_on_the_form(client):
    response = post(client, demo_form(notes="no worker"))
    assert response.status_code == 400
    assert "No worker is connected" in response.json()["errors"]["gpu_kind"][0]
    assert post(client, {"run_on": "wait-for-target"}).status_code == 201


@pytest.mark.parametrize("body", ["not json", "[1, 2]", "null", '{"prompt_file": "x"}'])
def test_a_body_that_is_not_a_job_is_400(client, cpu_worker, body):
    response = post(client, body)
    assert response.status_code == 400
    assert response.json()["errors"]
    assert not Job.objects.exists()


def test_a_body_not_sent_as_json_is_415(client, cpu_worker):
    # A cross-site form or text/plain post from a browser cannot use this API.
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        response = client.post(JOBS, "{}", content_type=content_type)
        assert response.status_code == 415
        assert "application/json" in response.json()["error"]
    assert not Job.objects.exists()


def test_an_unknown_field_is_named(client, cpu_worker):
    errors = post(client, {"prompt_tokenz": 5}).json()["errors"]
    assert list(errors) == ["prompt_tokenz"] and "Unknown field" in errors["prompt_tokenz"][0]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_dead_queue_is_503_and_leaves_no_row(client, cpu_worker, dead_broker):
    response = post(client, {"notes": "lost"})
    assert response.status_code == 503
    assert "The job queue is unavailable right now" in response.json()["error"]
    assert not Job.objects.exists()


# Follow and fetch ----------------------------------------------------------------------


def test_a_job_reports_its_state_progress_and_links(client):
    job = make_job(state=Job.State.RUNNING, progress=0.25, phase="decode", message="batch 4")
    response = client.get(f"{JOBS}/{job.share_token}")
    assert response.status_code == 200
    body = response.json()
    assert (body["state"], body["progress"], body["phase"], body["message"]) == (
        "running", 0.25, "decode", "batch 4",
    )  # fmt: skip
    assert body["links"]["result"] == f"http://testserver{JOBS}/{job.share_token}/result"
    assert response["Cache-Control"].startswith("max-age=0")


@pytest.mark.parametrize("token", ["A" * 22, "bad%00token", "x" * 40])
def test_an_unknown_token_is_404_json(client, token):
    for url in (f"{JOBS}/{token}", f"{JOBS}/{token}/result"):
        response = client.get(url)
        assert response.status_code == 404
        assert response.json() == {"error": "No job has this token."}


def test_the_result_is_409_until_the_job_succeeds(client):
    running = make_job(state=Job.State.RUNNING)
    response = client.get(f"{JOBS}/{running.share_token}/result")
    assert response.status_code == 409
    assert response.json()["state"] == "running"
    failed = make_job(state=Job.State.FAILED, error="boom")
    assert client.get(f"{JOBS}/{failed.share_token}/result").status_code == 409
    done = make_job(state=Job.State.SUCCEEDED, result={"schema_version": 1, "memory": {}})
    response = client.get(f"{JOBS}/{done.share_token}/result")
    assert response.status_code == 200 and response.json() == done.result


def test_a_wrong_method_is_405_json(client):
    response = client.get(JOBS)
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert "error" in response.json()


# Token ---------------------------------------------------------------------------------


def test_with_a_token_configured_a_submit_must_carry_it(client, cpu_worker, settings):
    settings.ADVISOR_API_TOKEN = "s3cret-token"
    response = post(client, {})
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert post(client, {}, Authorization="Bearer wrong").status_code == 401
    assert not Job.objects.exists()
    assert post(client, {}, Authorization="Bearer s3cret-token").status_code == 201


def test_reading_a_job_never_needs_the_token(client, settings):
    settings.ADVISOR_API_TOKEN = "s3cret-token"
    job = make_job()
    assert client.get(f"{JOBS}/{job.share_token}").status_code == 200
    assert client.get(reverse("jobs:detail", args=[job.share_token])).status_code == 200


# OpenAPI -------------------------------------------------------------------------------


def test_the_openapi_document_lists_the_paths_and_the_forms_fields(client):
    response = client.get(reverse("api:openapi"))
    assert response.status_code == 200
    doc = response.json()
    assert doc["openapi"].startswith("3.")
    assert doc["servers"] == [{"url": "http://testserver/api/v1"}]
    assert set(doc["paths"]) == {"/jobs", "/jobs/{token}", "/jobs/{token}/result"}
    assert set(doc["paths"]["/jobs"]["post"]["responses"]) >= {"201", "400", "503"}
    assert "409" in doc["paths"]["/jobs/{token}/result"]["get"]["responses"]
    schema = doc["components"]["schemas"]["JobRequest"]
    assert set(schema["properties"]) == set(submission.field_names())


def test_every_api_url_reverses_under_api_v1():
    assert reverse("api:jobs") == JOBS
    assert reverse("api:job", args=["abc"]) == f"{JOBS}/abc"
    assert reverse("api:job-result", args=["abc"]) == f"{JOBS}/abc/result"


@pytest.mark.parametrize(("typed", "key"), [("h100", "H100-SXM"), ("A100-80GB", "A100-80GB")])
def test_a_gpu_name_the_cli_takes_is_taken_here_and_stored_as_its_key(client, typed, key):
    response = post(client, {"gpu_kind": typed, "run_on": "wait-for-target"})
    assert response.status_code == 201, response.content
    assert Job.objects.get().gpu_kind == key


def test_an_unknown_gpu_name_is_a_field_error(client):
    response = post(client, {"gpu_kind": "TPU-v9", "run_on": "wait-for-target"})
    assert response.status_code == 400
    assert "gpu_kind" in response.json()["errors"]
    assert not Job.objects.exists()
