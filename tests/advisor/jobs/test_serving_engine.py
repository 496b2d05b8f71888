"""The serving engine a job's projections stand for (`serving_engine`, `--serving-engine`)
on the site's surfaces: the form's folded deployment details, the JSON API and its schema,
the job row's stored options and the config its worker gets, and the report's what-if."""

from __future__ import annotations

import json
import re

import pytest

from advisor.jobs.forms import DEPLOYMENT_DETAILS, JobForm
from advisor.jobs.models import Job
from advisor.jobs.profile_config import config_for
from tests.advisor.formdata import demo_form
from tests.advisor.pages import post_form, report_html

pytestmark = pytest.mark.django_db


def post_api(client, body: dict) -> object:
    return client.post("/api/v1/jobs", json.dumps(body), content_type="application/json")


def test_the_form_offers_it_folded_in_the_deployment_details(browser, cpu_worker):
    assert "serving_engine" in DEPLOYMENT_DETAILS
    html = browser.get("/").content.decode()
    fold = html[html.index('id="deployment-details"') :]
    fold = fold[: fold.index("</details>")]
    assert 'name="serving_engine"' in fold
    assert [c for c, _ in JobForm().fields["serving_engine"].choices] == [
        "vllm",
        "sglang",
        "trtllm",
    ]
    # Left as it is, the fold's summary says nothing is set.
    assert "nothing set" in JobForm().deployment_summary
    assert (
        "serving engine: sglang" in JobForm(demo_form(serving_engine="sglang")).deployment_summary
    )


def test_a_job_sent_from_the_form_keeps_it_and_its_worker_projects_on_it(browser, cpu_worker):
    assert post_form(browser, serving_engine="trtllm").status_code == 302
    job = Job.objects.get()
    assert job.options["serving_engine"] == "trtllm"
    assert config_for(job).hardware.serving_engine == "trtllm"


def test_the_api_takes_it_stores_it_and_refuses_an_engine_it_does_not_know(client, cpu_worker):
    assert post_api(client, {"serving_engine": "sglang"}).status_code == 201
    job = Job.objects.get()
    assert (job.serving_engine, job.options["serving_engine"]) == ("sglang", "sglang")
    assert config_for(job).hardware.serving_engine == "sglang"
    refused = post_api(client, {"serving_engine": "tgi"})
    assert refused.status_code == 400
    assert "serving_engine" in refused.content.decode()
    assert Job.objects.count() == 1
    # Left out: vLLM, as before the option existed.
    assert post_api(client, {}).status_code == 201
    assert config_for(Job.objects.latest("created_at")).hardware.serving_engine == "vllm"


def test_the_openapi_document_lists_the_engines_and_the_default(client):
    document = client.get("/api/v1/openapi.json").json()
    request = document["components"]["schemas"]["JobRequest"]
    field = request["properties"]["serving_engine"]
    text = json.dumps(field) + json.dumps(document["components"]["schemas"])
    assert field["default"] == "vllm"
    assert all(f'"{name}"' in text for name in ("vllm", "sglang", "trtllm"))


def test_the_what_if_projects_on_the_engine_asked_for_and_says_so(browser, demo_result):
    html = report_html(browser, demo_result)
    token = re.search(r"/jobs/([A-Za-z0-9_-]+)/result.json", html).group(1)
    query = {"whatif-gpu_kind": "H100-SXM", "whatif-gpu_count": "1", "whatif-concurrency": "8",
             "whatif-prompt_tokens": "512", "whatif-output_tokens": "128",
             "whatif-dtype": "bfloat16", "whatif-serving_engine": "sglang"}  # fmt: skip
    page = browser.get(f"/jobs/{token}/", query).content.decode()
    panel = page[page.index('id="what-if-panel"') :]
    assert "on SGLang&#x27;s limits" in panel or "on SGLang's limits" in panel
    assert "SGLang&#x27;s defaults" in panel or "SGLang's defaults" in panel


def test_a_what_if_link_without_an_engine_projects_on_the_jobs_own(browser, demo_result):
    demo_result["config"]["hardware"]["serving_engine"] = "trtllm"
    html = report_html(browser, demo_result)
    token = re.search(r"/jobs/([A-Za-z0-9_-]+)/result.json", html).group(1)
    query = {"whatif-gpu_kind": "H100-SXM", "whatif-gpu_count": "1", "whatif-concurrency": "8",
             "whatif-prompt_tokens": "512", "whatif-output_tokens": "128",
             "whatif-dtype": "bfloat16"}  # fmt: skip
    page = browser.get(f"/jobs/{token}/", query).content.decode()
    panel = page[page.index('id="what-if-panel"') :]
    assert "TensorRT-LLM" in panel.split("</h3>")[0]
