"""Submit the form over HTTP to the live server; a real worker profiles demo; read the report.

The client is plain `urllib` with a cookie jar: it fetches the CSRF token from
the form like a browser would, so nothing in the site is bypassed.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
import urllib.request
import uuid
from http.cookiejar import CookieJar

import pytest

from advisor.jobs.models import Job, Worker
from profiling.units import ms, tok_s
from tests.advisor.formdata import CSRF_INPUT, demo_form
from tests.conftest import JOB_TIMEOUT_S, WORKER_START_TIMEOUT_S

pytestmark = pytest.mark.slow

TOKEN_URL = re.compile(r"/jobs/([A-Za-z0-9_-]{16,})/$")


def wait_for_live_worker(timeout_s: float = WORKER_START_TIMEOUT_S) -> None:
    """The test DB is flushed between tests; the worker's next beat brings its row back."""
    deadline = time.monotonic() + timeout_s
    while not Worker.objects.live().exists():
        assert time.monotonic() < deadline, "no live worker row"
        time.sleep(0.2)


class Session:
    """A cookie-keeping HTTP client for the live server."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))

    def get(self, path: str) -> tuple[str, str]:
        with self.opener.open(self.base_url + path, timeout=30) as response:
            return response.geturl(), response.read().decode()

    def csrf_token(self, path: str) -> str:
        _, page = self.get(path)
        token = CSRF_INPUT.search(page)
        assert token, "the form has no CSRF token"
        return token.group(1)

    def post_form(self, path: str, fields: dict[str, str | list[str]]) -> tuple[str, str]:
        form = {**fields, "csrfmiddlewaretoken": self.csrf_token(path)}
        body = urllib.parse.urlencode(form, doseq=True).encode()  # a list: ticked checkboxes
        return self._post(path, body, "application/x-www-form-urlencoded")

    def post_multipart(
        self, path: str, fields: dict[str, str | list[str]], files: dict[str, tuple[str, bytes]]
    ) -> tuple[str, str]:
        """POST with file uploads: `files` maps a field to (filename, content)."""
        form = {**fields, "csrfmiddlewaretoken": self.csrf_token(path)}
        body, content_type = multipart(form, files)
        return self._post(path, body, content_type)

    def _post(self, path: str, body: bytes, content_type: str) -> tuple[str, str]:
        request = urllib.request.Request(
            self.base_url + path, data=body, method="POST", headers={"Content-Type": content_type}
        )
        with self.opener.open(request, timeout=30) as response:  # follows the redirect
            return response.geturl(), response.read().decode()


def multipart(fields: dict[str, str | list[str]], files: dict[str, tuple[str, bytes]]) -> tuple:
    """(body, content type) of a multipart/form-data POST, as a browser sends it."""
    boundary = uuid.uuid4().hex
    parts: list[bytes] = []
    for name, value in fields.items():
        for item in value if isinstance(value, list) else [value]:
            head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
            parts.append(head.encode() + item.encode() + b"\r\n")
    for name, (filename, data) in files.items():
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: text/plain\r\n\r\n'
        )
        parts.append(head.encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def demo_fields(**changes: str | list[str]) -> dict[str, str | list[str]]:
    # Target an H100 no worker serves, and run on the CPU worker instead.
    fields = {"gpu_kind": "H100-SXM", "run_on": "cpu", "ttft_ms": "800", "notes": "e2e over HTTP"}
    return demo_form(**{**fields, "stated_bottleneck": "generation", **changes})


def test_a_submitted_form_becomes_a_report_with_measured_numbers(
    live_server, worker, demo_model_dir
):
    wait_for_live_worker()
    client = Session(live_server.url)
    url, page = client.post_form("/", demo_fields())
    match = TOKEN_URL.search(url)
    assert match, f"not redirected to a job page: {url}\n{page[:2000]}"
    token = match.group(1)
    assert "Copy link" in page and 'id="cancel-job"' in page  # the submitter's view

    deadline, seen = time.monotonic() + JOB_TIMEOUT_S, []
    while True:
        _, body = client.get(f"/jobs/{token}/status")
        status = json.loads(body)
        seen.append(status["progress"])
        if status["final"]:
            break
        assert time.monotonic() < deadline, f"job still {status} after {JOB_TIMEOUT_S} s"
        time.sleep(0.3)
    job = Job.objects.get(share_token=token)
    assert status["state"] == "succeeded", job.error
    assert seen == sorted(seen) and seen[-1] == 1.0  # progress only moves forward

    _, report = client.get(f"/jobs/{token}/")
    assert 'id="verdict"' in report and "Speed up token generation" in report
    assert "usable on 1 × H100-SXM" in report  # the projection to the target
    # Real numbers from the run: every prefill median the page shows came from the row.
    for point in job.result["prefill"]:
        assert f">{ms(point['seconds']['median'])}<" in report
    for point in job.result["decode"]:
        assert f">{tok_s(point['tokens_per_second'])}<" in report
    assert job.result["model"]["name"] == "demo" and not job.result["model"]["config_only"]
    assert job.queue == "cpu" and job.gpu_kind == "H100-SXM"

    _, raw = client.get(f"/jobs/{token}/result.json")
    assert json.loads(raw) == job.result
