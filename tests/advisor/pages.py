"""Helpers for the page tests: the form as a browser posts it, sessions, stored reports."""

from __future__ import annotations

from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from advisor.jobs.models import Job
from advisor.jobs.ownership import SESSION_KEY
from tests.advisor.cachedata import (
    caching_result,
    parallel_result,
    with_caching,
    with_parallel,
)
from tests.advisor.formdata import CSRF_INPUT, demo_form
from tests.advisor.quantdata import quantization_result, with_quantization


def form_data(**changes: str) -> dict[str, str]:
    return demo_form(**{"stated_bottleneck": "generation", **changes})


def csrf_token(client: Client, url: str = "/") -> str:
    match = CSRF_INPUT.search(client.get(url).content.decode())
    assert match, f"no CSRF token in the form at {url}"
    return match.group(1)


def post_form(client: Client, **changes: str):
    return client.post("/", {**form_data(**changes), "csrfmiddlewaretoken": csrf_token(client)})


def own(client: Client, job: Job) -> None:
    """Make `client`'s session the submitter of `job`."""
    session = client.session
    session[SESSION_KEY] = [job.share_token]
    session.save()


def make_job(**fields: Any) -> Job:
    return Job.objects.create(**{"model_source": "demo", "model_name": "demo", **fields})


def report_html(client: Client, result: dict[str, Any], **fields: Any) -> str:
    job = make_job(state=Job.State.SUCCEEDED, progress=1.0, result=result, **fields)
    response = client.get(reverse("jobs:detail", args=[job.share_token]))
    assert response.status_code == 200
    return response.content.decode()


def quant_report(client: Client, demo_result: dict[str, Any], **changes: Any) -> str:
    return report_html(client, with_quantization(demo_result, quantization_result(**changes)))


def post_with_file(client: Client, content: bytes, name: str = "prompts.txt", **changes: str):
    token = csrf_token(client)
    prompt_file = SimpleUploadedFile(name, content, content_type="text/plain")
    data = {**form_data(**changes), "csrfmiddlewaretoken": token, "prompt_file": prompt_file}
    return client.post("/", data)  # multipart, as the page's enctype makes a browser send


def field_block(html: str, name: str) -> str:
    return html.split(f'id="field-{name}"')[1].split("</div>")[0]


def caching_report(client: Client, demo_result: dict[str, Any], **changes: Any) -> str:
    return report_html(client, with_caching(demo_result, caching_result(**changes)))


def parallel_report(client: Client, demo_result: dict[str, Any], **changes: Any) -> str:
    return report_html(client, with_parallel(demo_result, parallel_result(**changes)))


def table_rows(html: str, table_id: str) -> list[str]:
    table = html.split(f'id="{table_id}"')[1].split("</table>")[0]
    return table.split("<tbody>")[1].split("</tr>")[:-1]
