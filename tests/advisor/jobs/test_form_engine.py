"""The engine choice on the form: offered as live workers announce it, refused otherwise."""

from __future__ import annotations

import re

import pytest

from advisor.jobs.forms import JobForm
from advisor.jobs.models import Worker
from tests.advisor.formdata import demo_form

pytestmark = pytest.mark.django_db


def test_the_engine_select_offers_off_and_vllm_and_starts_off(cpu_worker):
    field = JobForm()["engine"]
    assert [(value, label) for value, label in field.field.choices] == [
        ("", "Off"),
        ("vllm", "vllm"),
    ]
    assert field.value() == ""


def test_vllm_is_refused_while_no_live_worker_has_it(cpu_worker):
    form = JobForm(demo_form(engine="vllm"))
    assert not form.is_valid()
    assert list(form.errors) == ["engine"]
    assert "No live worker has vllm" in form.errors["engine"][0]


def test_a_worker_that_announces_vllm_makes_it_a_choice_that_reaches_the_config(cpu_worker):
    from advisor.jobs.profile_config import config_for

    cpu_worker.engines = {"vllm": "0.32.0"}
    cpu_worker.save()
    form = JobForm(demo_form(engine="vllm"))
    assert form.is_valid(), form.errors
    job = form.save()
    assert job.engine == "vllm"
    assert config_for(job).engine == "vllm"
    assert JobForm(demo_form())  # blank stays valid
    off = JobForm(demo_form(engine=""))
    assert off.is_valid(), off.errors
    assert off.save().engine == ""


def test_a_stale_worker_does_not_count(cpu_worker, settings):
    from datetime import timedelta

    from django.utils import timezone

    Worker.objects.filter(pk=cpu_worker.pk).update(
        engines={"vllm": "0.32.0"},
        last_seen=timezone.now() - timedelta(seconds=settings.ADVISOR_WORKER_STALE_S + 60),
    )
    assert "engine" in JobForm(demo_form(engine="vllm")).errors


def test_the_new_job_page_says_which_worker_has_an_engine(client, cpu_worker):
    page = client.get("/").content.decode()
    assert 'id="engine-none"' in page and "scripts/engine-env" in page
    assert re.search(r'<select name="engine"[^>]*disabled', page)
    cpu_worker.engines = {"vllm": "0.32.0"}
    cpu_worker.save()
    page = client.get("/").content.decode()
    assert 'id="engine-live"' in page and "vllm 0.32.0" in page
    assert not re.search(r'<select name="engine"[^>]*disabled', page)


def test_the_api_takes_the_engine_with_the_same_check(client, cpu_worker):
    from advisor.jobs.models import Job
    from tests.advisor.api.test_api import post

    refused = post(client, {"engine": "vllm"})
    assert refused.status_code == 400
    assert "No live worker has vllm" in str(refused.json())
    assert post(client, {"engine": "sglang"}).status_code == 400
    cpu_worker.engines = {"vllm": "0.32.0"}
    cpu_worker.save()
    assert post(client, {"engine": "vllm"}).status_code == 201
    assert Job.objects.get().engine == "vllm"
