"""Every experiment, end to end: the form (with a prompt file) → a real worker → the report.

One job asks for quantization, speculative decoding, prefix caching (with an
uploaded prompt sample) and parallelism on `demo`; the page must show each
section with the figures the worker stored, and the advice built from them.
"""

from __future__ import annotations

import html
import json
import time

import pytest

from advisor.jobs.models import Job
from tests.e2e.test_submit_to_report import TOKEN_URL, Session, demo_fields, wait_for_live_worker

pytestmark = pytest.mark.slow

JOB_TIMEOUT_S = 480  # four experiments on two busy cores
PROMPTS = "\n".join(
    f"You are a helpful assistant for the serving team. Question {i}: how fast is decode?"
    for i in range(40)
)


def wait_until_final(client: Session, token: str) -> dict:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while True:
        _, body = client.get(f"/jobs/{token}/status")
        status = json.loads(body)
        if status["final"]:
            return status
        assert time.monotonic() < deadline, f"job still {status} after {JOB_TIMEOUT_S} s"
        time.sleep(0.5)


def test_every_experiment_reaches_the_report_with_the_workers_figures(
    live_server, worker, demo_model_dir
):
    wait_for_live_worker()
    client = Session(live_server.url)
    fields = demo_fields(
        prompt_tokens="128", output_tokens="16", concurrency="2", shared_prefix_tokens="64",
        stated_bottleneck="prompt",
        run_quantization="on", precisions=["fp32", "int8"],
        run_speculative="on", spec_ks="2",
        run_caching="on", run_parallel="on", tp_measure="0",
    )  # fmt: skip
    url, page = client.post_multipart(
        "/", fields, {"prompt_file": ("prompts.txt", PROMPTS.encode())}
    )
    match = TOKEN_URL.search(url)
    assert match, f"not redirected to a job page: {url}\n{page[:3000]}"
    token = match.group(1)

    status = wait_until_final(client, token)
    job = Job.objects.get(share_token=token)
    assert status["state"] == "succeeded", job.error
    result = job.result
    assert set(result["experiments_run"]) >= {"quantization", "speculative", "caching", "parallel"}
    assert result["caching"]["prompt_sample"]["prompts"] == 40
    assert result["config"]["prompt_sample"] == []  # the figures are kept, not the prompts

    _, report = client.get(f"/jobs/{token}/")
    for section in ("advice", "predictions", "quantization", "speculative", "caching", "parallel"):
        assert f'id="{section}"' in report, section
    for finding in (
        result["quantization"]["finding"],
        result["speculative"]["finding"],
        result["caching"]["finding"],
    ):
        assert finding and html.escape(finding[1:]) in report  # sections may capitalise it
    names = [v["name"] for v in result["quantization"]["variants"]]
    assert names[:2] == ["fp32", "int8"]
    advice = result["advice"]
    assert advice["stated_bottleneck"] == "prompt"
    first = (advice["recommendations"] or [{}])[0].get("setting")
    assert first is None or html.escape(first) in report
