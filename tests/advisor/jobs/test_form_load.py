"""The target load (`load_rps`, `load_users`: `profiling.fleet_options.TARGET_LOAD`) on the
form, the API and the job row: optional, one of the two, only with a TTFT or TPOT target,
refused on its field in the declaration's words, and handed to the worker's config."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from advisor.jobs.forms import JobForm
from advisor.jobs.models import Job, Worker
from advisor.jobs.profile_config import config_for
from profiling.options import OPTIONS
from tests.advisor.formdata import demo_form

pytestmark = pytest.mark.django_db
JOBS = "/api/v1/jobs"


@pytest.fixture
def cpu_worker() -> Worker:
    return Worker.objects.create(name="local@host", host="host", queues=",cpu,default,")


def post(body: dict) -> object:
    return Client().post(JOBS, json.dumps(body), content_type="application/json")


def test_the_form_stores_a_request_rate_and_the_worker_gets_it(cpu_worker):
    form = JobForm(demo_form(tpot_ms="40", load_rps="12.5"))
    assert form.is_valid(), form.errors
    job = form.save()
    stored = Job.objects.values_list("options", flat=True).get(pk=job.pk)
    assert stored["load_rps"] == 12.5 and stored["load_users"] is None
    config = config_for(Job.objects.get(pk=job.pk))
    assert (config.load_rps, config.load_users) == (12.5, None)
    assert (
        "target load (requests/s): 12.5" in JobForm(demo_form(load_rps="12.5")).deployment_summary
    )


def test_the_form_stores_users(cpu_worker):
    form = JobForm(demo_form(ttft_ms="800", load_users="64"))
    assert form.is_valid(), form.errors
    assert config_for(form.save()).load_users == 64


def test_a_load_without_a_target_is_refused_on_its_field(cpu_worker):
    form = JobForm(demo_form(load_rps="5"))
    assert not form.is_valid()
    assert form.errors["load_rps"] == [
        "A target load is sized within targets: give a TTFT or a TPOT target too."
    ]


def test_both_loads_are_refused_on_the_users_field(cpu_worker):
    form = JobForm(demo_form(tpot_ms="40", load_rps="5", load_users="10"))
    assert not form.is_valid()
    assert "not both" in form.errors["load_users"][0]
    assert form.deployment_errors  # the fold opens on it


@pytest.mark.parametrize(("field", "value"), [("load_rps", "0"), ("load_rps", "nan"),
                                              ("load_users", "0"), ("load_users", "2.5"),
                                              ("load_rps", "1e9")])  # fmt: skip
def test_a_bad_load_is_a_field_error(cpu_worker, field, value):
    form = JobForm(demo_form(tpot_ms="40", **{field: value}))
    assert not form.is_valid()
    assert list(form.errors) == [field]


def test_the_api_takes_the_load_as_json_and_stores_it(cpu_worker):
    response = post({"model_name": "demo", "tpot_ms": 40, "load_users": 100})
    assert response.status_code == 201, response.content
    assert Job.objects.get().load_users == 100


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [({"tpot_ms": 40, "load_rps": "5"}, "load_rps", "JSON number"),
     ({"tpot_ms": 40, "load_users": 0}, "load_users", "greater than or equal to 1"),
     ({"load_rps": 5}, "load_rps", "TTFT or a TPOT"),
     ({"tpot_ms": 40, "load_rps": 5, "load_users": 3}, "load_users", "not both")],
)  # fmt: skip
def test_the_api_refuses_a_bad_load_with_a_400_on_its_field(cpu_worker, body, field, words):
    response = post(body)
    assert response.status_code == 400, response.content
    assert words in " ".join(response.json()["errors"][field])
    assert not Job.objects.exists()


def test_the_openapi_document_declares_the_load(client):
    schema = client.get("/api/v1/openapi.json").json()
    request = json.dumps(schema, ensure_ascii=False)
    for name in ("load_rps", "load_users"):
        assert name in request and OPTIONS[name].help in request
