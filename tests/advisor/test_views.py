"""Job pages through a CSRF-enforcing client: submit, list, job page, status, cancel, JSON."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from advisor.celery import app
from advisor.jobs.models import Job, PromptSample, Worker
from advisor.jobs.ownership import SESSION_KEY
from profiling.config import PROMPT_SAMPLE_MAX_BYTES
from profiling.parallel.results import MeasuredTP
from tests.advisor.cachedata import (
    SKIPPED_REASON,
    caching_result,
    measured_tp,
    parallel_result,
    point,
    with_caching,
    with_parallel,
)
from tests.advisor.formdata import CSRF_INPUT, demo_form
from tests.advisor.quantdata import INT4_REASON, quantization_result, with_quantization
from tests.advisor.test_charts import real_demo_profile, real_spec_profile

pytestmark = pytest.mark.django_db


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


@pytest.fixture
def dead_broker(settings):
    """A broker address nothing listens on (and that must not be started)."""
    saved = app.conf.broker_url
    settings.ADVISOR_EMBEDDED_REDIS = None
    app.conf.broker_url = "redis+socket:///nonexistent/advisor/redis.sock"
    yield
    app.conf.broker_url = saved


@pytest.fixture
def demo_result(request: pytest.FixtureRequest, demo_model_dir: Path) -> dict[str, Any]:
    return real_demo_profile(request.config)


# New job ------------------------------------------------------------------------


def test_the_form_page_renders_with_defaults_and_a_csrf_token(browser, cpu_worker):
    response = browser.get(reverse("jobs:new"))
    assert response.status_code == 200
    html = response.content.decode()
    assert CSRF_INPUT.search(html)
    assert 'name="prompt_tokens" value="512"' in html
    assert "writing" in html.lower() or "write down" in html.lower()
    assert "cpu — local@host (CPU)" in html


def test_posting_without_the_csrf_token_is_refused(browser, cpu_worker):
    browser.get("/")
    assert browser.post("/", form_data()).status_code == 403
    assert not Job.objects.exists()


def test_a_valid_post_creates_a_queued_job_and_remembers_it(browser, cpu_worker):
    response = post_form(browser, notes="first try")
    job = Job.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("jobs:detail", args=[job.share_token])
    assert (job.state, job.queue, job.notes) == (Job.State.QUEUED, "default", "first try")
    assert browser.session[SESSION_KEY] == [job.share_token]
    listing = browser.get(reverse("jobs:list")).content.decode()
    assert job.share_token in listing


def test_an_invalid_post_keeps_the_input_and_shows_errors_by_the_fields(browser, cpu_worker):
    response = post_form(browser, prompt_tokens="0", notes="keep me", model_name="demo-nope")
    assert response.status_code == 200
    html = response.content.decode()
    assert "keep me" in html and 'value="demo-nope"' in html
    prompt_field = html[html.index('id="field-prompt_tokens"') :][:800]
    assert "greater than or equal to 1" in prompt_field
    assert "built-in models" in html[html.index('id="field-model_name"') :][:800]
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_dead_queue_re_renders_the_form_with_the_input_kept(browser, cpu_worker, dead_broker):
    response = post_form(browser, notes="still here", prompt_tokens="777")
    assert response.status_code == 200
    html = response.content.decode()
    assert "The job queue is unavailable right now" in html
    assert "still here" in html and 'value="777"' in html
    assert not Job.objects.filter(state=Job.State.QUEUED).exists()
    assert SESSION_KEY not in browser.session


def test_with_no_workers_the_form_says_how_to_start_one(browser):
    html = browser.get("/").content.decode()
    assert "No worker is connected right now" in html
    assert "./scripts/run-local" in html


def test_an_unserved_target_is_an_error_by_the_field_with_a_run_on_choice(browser, cpu_worker):
    html = post_form(browser, gpu_kind="H100-SXM").content.decode()
    gpu_field = html[html.index('id="field-gpu_kind"') :][:3000]
    assert "No live worker serves the gpu-h100-sxm queue" in gpu_field
    response = post_form(browser, gpu_kind="H100-SXM", run_on="cpu")
    assert response.status_code == 302
    assert Job.objects.get().queue == "cpu"


def test_the_form_says_when_the_default_target_has_no_worker(browser):
    Worker.objects.create(name="gpu@box", host="box", queues=",gpu-l4,")
    html = browser.get("/").content.decode()
    assert 'id="unserved-note">' in html  # shown, not hidden
    assert "gpu-l4 — gpu@box" in html


# Recent jobs --------------------------------------------------------------------


def test_recent_jobs_has_a_helpful_empty_state(browser):
    html = browser.get(reverse("jobs:list")).content.decode()
    assert "Nothing profiled from this browser yet" in html
    assert reverse("jobs:new") in html


def test_recent_jobs_lists_only_this_sessions_jobs(browser):
    mine, theirs = make_job(model_name="demo"), make_job(model_name="demo-draft")
    own(browser, mine)
    html = browser.get(reverse("jobs:list")).content.decode()
    assert mine.share_token in html and theirs.share_token not in html


# Job page -----------------------------------------------------------------------


def test_a_queued_job_shows_progress_and_a_cancel_button_to_its_owner(browser):
    job = make_job(state=Job.State.RUNNING, progress=0.4, phase="decode")
    own(browser, job)
    html = browser.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    assert f'data-status-url="{reverse("jobs:status", args=[job.share_token])}"' in html
    assert 'aria-valuenow="40"' in html
    assert 'id="cancel-job"' in html
    assert "advisor/progress.js" in html


def test_the_share_link_is_read_only_for_another_session(browser):
    job = make_job(state=Job.State.RUNNING)
    html = browser.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    assert 'id="cancel-job"' not in html
    assert "(read-only)" in html
    assert f"http://testserver/jobs/{job.share_token}/" in html
    assert 'id="copy-link"' in html


def test_an_unknown_token_is_a_friendly_404(browser):
    response = browser.get("/jobs/not-a-real-token/")
    assert response.status_code == 404
    assert "No such job" in response.content.decode()


def test_a_failed_job_shows_its_reason(browser):
    job = make_job(state=Job.State.FAILED, error="ModelSourceError: no safetensors weights")
    html = browser.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    assert "The job failed" in html and "no safetensors weights" in html
    assert "progress.js" not in html


def test_a_cancelled_job_says_so(browser):
    job = make_job(state=Job.State.CANCELLED, message="cancelled")
    html = browser.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    assert "Cancelled" in html


# The report ---------------------------------------------------------------------


def report_html(client: Client, result: dict[str, Any], **fields: Any) -> str:
    job = make_job(state=Job.State.SUCCEEDED, progress=1.0, result=result, **fields)
    response = client.get(reverse("jobs:detail", args=[job.share_token]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_succeeded_job_is_its_report(browser, demo_result):
    html = report_html(browser, demo_result, stated_bottleneck="generation", ttft_ms=500)
    for part in ("verdict", "memory", "prefill", "decode", "environment"):
        assert f'id="{part}"' in html
    for chart in ("chart-memory", "chart-prefill", "chart-decode"):
        assert f'<script id="{chart}" type="application/json">' in html
    assert "/static/plotly/plotly.min.js" in html
    assert "Speed up token generation" in html  # what the user wrote down
    assert "dominates" in html  # what was measured
    assert "Time to first token" in html and "500 ms" in html
    assert " ms<" in html and " tok/s<" in html and " GB<" in html and " GB/s<" in html
    assert "config only" not in html.lower()
    assert "Download result.json" in html


def test_noisy_points_are_flagged(browser, demo_result):
    # One real measurement made noisy: its slowest sample doubled.
    samples = demo_result["prefill"][0]["seconds"]["samples"]
    samples[samples.index(max(samples))] *= 3
    html = report_html(browser, demo_result)
    from profiling.results import Profile

    profile = Profile.from_dict(demo_result)
    noisy = sum(p.seconds.noisy for p in profile.prefill) + sum(
        p.seconds_per_token.noisy for p in profile.decode
    )
    assert noisy >= 1
    assert html.count('<tr class="noisy">') == noisy


def test_a_config_only_result_carries_the_banner(browser, demo_result):
    demo_result["model"]["config_only"] = True
    html = report_html(browser, demo_result)
    assert "Config only — random weights:" in html
    assert "valid for memory and time, not quality" in html


@pytest.fixture
def spec_result(request: pytest.FixtureRequest, demo_model_dir: Path) -> dict[str, Any]:
    return real_spec_profile(request.config)


def test_the_form_page_has_the_speculative_fieldset(browser, cpu_worker):
    html = browser.get("/").content.decode()
    assert "<legend>Speculative decoding</legend>" in html
    assert 'id="field-spec_ks"' in html and 'id="field-draft_model"' in html


def test_a_bad_k_is_shown_next_to_its_field(browser, cpu_worker):
    html = post_form(browser, run_speculative="on", spec_ks="17").content.decode()
    field = html.split('id="field-spec_ks"')[1].split("</div>")[0]
    assert "from 1 to 16" in field


def test_a_report_without_speculative_has_no_such_section(browser, demo_result):
    html = report_html(browser, demo_result)
    assert 'id="speculative"' not in html and "chart-speculative" not in html


def test_a_speculative_result_shows_the_finding_chart_table_and_trace(browser, spec_result):
    speculative = spec_result["speculative"]
    html = report_html(browser, spec_result)
    assert 'id="speculative"' in html
    assert '<script id="chart-speculative" type="application/json">' in html
    assert escape(speculative["finding"]) in html
    assert html.count('class="best"') == len(speculative["best_k"])
    for draft in speculative["draft_memory"]:
        assert f"<td>{draft['name']}</td>" in html
    trace = html.split('id="spec-trace"')[1].split("</ol>")[0]
    assert trace.count('<li class="step">') == len(speculative["trace"])
    rejected = [s for s in speculative["trace"] if s["accepted_count"] < len(s["proposed"])]
    assert rejected, "a real demo-draft trace has rejections"
    assert trace.count('<del class="tok rej">') == len(rejected)
    assert trace.count('<span class="tok acc">') == sum(
        s["accepted_count"] for s in speculative["trace"]
    )
    assert ('id="spec-random-banner"' in html) is (not speculative["acceptance_meaningful"])


def test_token_text_in_the_trace_is_escaped(browser, spec_result):
    step = spec_result["speculative"]["trace"][0]
    step["proposed_text"][0] = "<script>alert(1)</script>"
    step["target_text"] = "<b>x</b>"
    html = report_html(browser, spec_result)
    assert "<script>alert(1)</script>" not in html and "<b>x</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html


def test_random_weights_show_the_verify_cost_banner(browser, spec_result):
    spec_result["speculative"]["acceptance_meaningful"] = False
    html = report_html(browser, spec_result)
    assert 'id="spec-random-banner"' in html
    assert "only the verify-cost curve" in html


def test_the_form_page_has_the_quantization_fieldset_with_its_default_ticks(browser, cpu_worker):
    html = browser.get("/").content.decode()
    fieldset = html.split('id="quantization-fields"')[1].split('id="speculative-fields"')[0]
    assert "<legend>Quantization</legend>" in fieldset
    ticked = re.findall(r'name="precisions" value="([^"]+)"[^>]*checked', fieldset)
    assert ticked == ["fp32", "int8", "int4"]
    assert 'name="quant_keep" value="lm_head"' in html


def test_too_few_precisions_are_shown_next_to_their_field(browser, cpu_worker):
    html = post_form(browser, run_quantization="on", precisions=["int8"]).content.decode()
    field = html.split('id="field-precisions"')[1].split("</fieldset>")[0]
    assert "at least 2 precisions" in field
    assert not Job.objects.exists()


def test_quantization_choices_are_saved_from_the_browser(browser, cpu_worker):
    response = post_form(
        browser, run_quantization="on", precisions=["int8", "bf16"], quant_keep=["embeddings"]
    )
    assert response.status_code == 302
    job = Job.objects.get()
    assert (job.run_quantization, job.precisions, job.quant_keep) == (
        True, "bf16,int8", "embeddings",
    )  # fmt: skip


def quant_report(client: Client, demo_result: dict[str, Any], **changes: Any) -> str:
    return report_html(client, with_quantization(demo_result, quantization_result(**changes)))


def test_a_report_without_quantization_has_no_such_section(browser, demo_result):
    html = report_html(browser, demo_result)
    assert 'id="quantization"' not in html and "chart-quantization" not in html


def test_a_quantization_result_shows_the_finding_chart_and_a_row_per_variant(browser, demo_result):
    result = quantization_result()
    html = quant_report(browser, demo_result)
    assert 'id="quantization"' in html
    assert '<script id="chart-quantization" type="application/json">' in html
    assert escape(result.finding) in html
    table = html.split('id="quant-variants"')[1].split("</table>")[0]
    rows = table.split("<tbody>")[1].split("</tr>")[:-1]
    assert [re.search(r"<td>([^<]+)", row).group(1).strip() for row in rows] == [
        "fp32", "int8", "int4",
    ]  # fmt: skip
    reference, int8, int4 = rows
    assert 'class="variant measured reference"' in reference and "×" not in reference
    for cell in ("2.00 MB", "4.0× smaller", "3.00 MB", "3.0× smaller", "56.0 ms", "14.0 ms",
                 "71.4 tok/s", "286 tok/s", "1.4× slower", "12.9", "1.03× higher", "96.0 %",
                 "0.0123 nats"):  # fmt: skip
        assert cell in int8, cell
    assert "not available here" in int4 and escape(INT4_REASON) in int4
    assert "Decode, batch 8" in table
    assert 'id="quant-random-banner"' not in html
    settings = html.split('id="quant-settings"')[1].split("</details>")[0]
    assert "torchao 0.18.0" in settings and "<td>lm_head</td>" in settings


def test_a_variant_that_does_not_fit_says_so_with_its_reason(browser, demo_result):
    result = quantization_result()
    int4 = result.variants[2]
    int4.status, int4.reason = "does_not_fit", "CUDA out of memory while loading"
    html = report_html(browser, with_quantization(demo_result, result))
    row = html.split('class="variant does_not_fit"')[1].split("</tr>")[0]
    assert "does not fit" in row and "CUDA out of memory while loading" in row


def test_greedy_outputs_mark_the_first_divergence_on_both_sides(browser, demo_result):
    html = quant_report(browser, demo_result)
    greedy = html.split('<table class="data greedy">')[1].split("</table>")[0]
    diverging, identical = greedy.split("<tbody>")[1].split("</tr>")[:2]
    reference, variant = diverging.split('<td class="tokens">')[1:]
    assert reference.startswith(
        '<span class="gtok same">·the</span><span class="gtok same">·cat</span>'
        '<span class="gtok same">·sat</span><mark class="gtok diverge">·on</mark>'
        '<span class="gtok after">·the</span><span class="gtok after">·mat</span>'
    )
    assert '<mark class="gtok diverge">·in</mark><span class="gtok after">·a</span>' in variant
    assert "differs from token 4" in diverging
    assert "identical" in identical and "diverge" not in identical


def test_model_text_and_reasons_in_the_quantization_section_are_escaped(browser, demo_result):
    result = quantization_result()
    int8, int4 = result.variants[1], result.variants[2]
    int8.samples[0].text[3] = "<script>alert(1)</script>"
    int8.samples[0].prompt = "<img src=x onerror=alert(2)>"
    int4.reason = "<script>alert(3)</script>"
    html = report_html(browser, with_quantization(demo_result, result))
    for raw in ("<script>alert(1)</script>", "<img src=x", "<script>alert(3)</script>"):
        assert raw not in html
    assert '<mark class="gtok diverge">&lt;script&gt;alert(1)&lt;/script&gt;</mark>' in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in html


def test_random_weights_show_the_quality_banner(browser, demo_result):
    html = quant_report(browser, demo_result, quality_meaningful=False)
    banner = html.split('id="quant-random-banner"')[1].split("</div>")[0]
    assert "quality is not meaningful" in banner and "memory and speed are real" in banner


def test_an_unreadable_result_is_a_message_not_a_500(browser):
    html = report_html(browser, {"schema_version": 99, "something": "else"})
    assert "could not be read" in html


# Status, cancel, result.json --------------------------------------------------------


def test_status_is_small_json(browser):
    job = make_job(state=Job.State.RUNNING, progress=0.25, phase="prefill", message="batch 1")
    response = browser.get(reverse("jobs:status", args=[job.share_token]))
    assert response.status_code == 200
    assert response.json() == {
        "state": "running", "state_label": "Running", "progress": 0.25,
        "phase": "prefill", "message": "batch 1", "final": False,
    }  # fmt: skip
    assert "no-cache" in response["Cache-Control"]
    assert browser.get("/jobs/nope/status").status_code == 404


def test_the_owner_can_cancel_with_csrf(browser):
    job = make_job()
    own(browser, job)
    token = csrf_token(browser, reverse("jobs:detail", args=[job.share_token]))
    url = reverse("jobs:cancel", args=[job.share_token])
    response = browser.post(url, {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.state == Job.State.CANCELLED


def test_cancel_needs_csrf_and_post(browser):
    job = make_job()
    own(browser, job)
    url = reverse("jobs:cancel", args=[job.share_token])
    assert browser.post(url).status_code == 403
    assert browser.get(url).status_code == 405
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED


def test_another_session_cannot_cancel(browser):
    job = make_job()
    token = csrf_token(browser)  # the read-only job page has no form at all
    response = browser.post(
        reverse("jobs:cancel", args=[job.share_token]), {"csrfmiddlewaretoken": token}
    )
    assert response.status_code == 403
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED


def test_result_json_is_an_attachment_with_the_stored_result(browser, demo_result):
    job = make_job(state=Job.State.SUCCEEDED, result=demo_result)
    response = browser.get(reverse("jobs:result-json", args=[job.share_token]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert (
        response["Content-Disposition"]
        == f'attachment; filename="profile-demo-{job.share_token[:8]}.json"'
    )
    assert json.loads(response.content) == demo_result


def test_result_json_of_an_unfinished_job_is_404(browser):
    job = make_job()
    assert browser.get(reverse("jobs:result-json", args=[job.share_token])).status_code == 404


# Prefix caching and parallelism: the form -------------------------------------------

FIXTURES = Path(__file__).parent / "fixtures"


def post_with_file(client: Client, content: bytes, name: str = "prompts.txt", **changes: str):
    token = csrf_token(client)
    prompt_file = SimpleUploadedFile(name, content, content_type="text/plain")
    data = {**form_data(**changes), "csrfmiddlewaretoken": token, "prompt_file": prompt_file}
    return client.post("/", data)  # multipart, as the page's enctype makes a browser send


def field_block(html: str, name: str) -> str:
    return html.split(f'id="field-{name}"')[1].split("</div>")[0]


def test_the_form_page_uploads_as_multipart_and_has_the_caching_and_parallel_fieldsets(
    browser, cpu_worker
):
    html = browser.get("/").content.decode()
    form_tag = html.split("<form", 2)[1].split(">")[0]
    assert 'enctype="multipart/form-data"' in form_tag and 'method="post"' in form_tag
    caching = html.split('id="caching-fields"')[1].split("</fieldset>")[0]
    assert "<legend>Reuse prompt work (prefix caching)</legend>" in caching
    assert 'type="checkbox" name="run_caching"' in caching
    assert 'type="file" name="prompt_file"' in caching and "JSON Lines" in caching
    parallel = html.split('id="parallel-fields"')[1].split("</fieldset>")[0]
    assert "<legend>Split work across devices</legend>" in parallel
    assert 'type="checkbox" name="run_parallel"' in parallel
    options = re.findall(r'<option value="([^"]*)"', parallel.split('name="tp_measure"')[1])
    assert options == ["", "0", "2", "4", "8"]
    assert "two processes with gloo" in parallel


def test_a_prompt_file_is_saved_with_the_job_and_only_its_size_is_shown(browser, cpu_worker):
    content = b"SECRET-PROMPT-1 what is a KV cache?\nSECRET-PROMPT-2 and a prefix?\n"
    response = post_with_file(browser, content, notes="with prompts")
    assert response.status_code == 302
    job = Job.objects.get()
    sample = PromptSample.objects.get(job=job)
    assert job.run_caching and sample.prompt_count == 2 and sample.size_bytes == len(content)
    page = browser.get(response["Location"]).content.decode()
    shown = page.split('id="prompt-sample"')[1].split("</dd>")[0]
    assert "prompts.txt" in shown and "2 prompts" in shown and f"{len(content)} B" in shown
    assert "SECRET-PROMPT" not in page


def test_the_admin_shows_the_samples_size_not_its_prompts(admin_client):
    job = make_job()
    PromptSample.objects.create(
        job=job, filename="mine.txt", prompts=["SECRET-PROMPT-A", "SECRET-PROMPT-B"],
        prompt_count=2, size_bytes=32, sha256="ab" * 32,
    )  # fmt: skip
    change = admin_client.get(f"/admin/jobs/job/{job.pk}/change/").content.decode()
    listing = admin_client.get("/admin/jobs/job/").content.decode()
    assert "SECRET-PROMPT" not in change + listing
    assert "mine.txt (2 prompts) · 32 B · sha256 abababababab" in change


def test_a_jsonl_chat_file_is_accepted_from_the_browser(browser, cpu_worker):
    content = b'{"messages": [{"role": "user", "content": "hello"}]}\n{"prompt": "bye"}\n'
    assert post_with_file(browser, content, "chats.jsonl").status_code == 302
    assert Job.objects.get().sample_prompts() == ["user: hello", "bye"]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "The prompt file is empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "looks binary"),
        (b'{"prompt": "fine"}\n{"prompt": "cut off\n', "Line 2: not valid JSON"),
    ],
)
def test_a_bad_prompt_file_is_refused_next_to_its_field_and_the_rest_is_kept(
    browser, cpu_worker, content, words
):
    response = post_with_file(
        browser, content, notes="keep my notes", prompt_tokens="777", run_parallel="on",
        tp_measure="2",
    )  # fmt: skip
    assert response.status_code == 200
    html = response.content.decode()
    field = field_block(html, "prompt_file")
    assert words in field and "choose it again" in field
    assert "keep my notes" in html and 'value="777"' in html
    assert re.search(r'name="run_parallel"[^>]*checked', html)
    assert re.search(r'<option value="2" selected>', html)
    assert not Job.objects.exists() and not PromptSample.objects.exists()


def test_an_oversized_prompt_file_is_refused_with_the_limit(browser, cpu_worker):
    content = b"x" * 1000 + b"\n"
    content *= PROMPT_SAMPLE_MAX_BYTES // len(content) + 1
    html = post_with_file(browser, content, notes="big").content.decode()
    field = field_block(html, "prompt_file")
    assert "The prompt file is 16.0 MB; the limit is 16 MB" in field
    assert "big" in html and not Job.objects.exists()


def test_a_good_file_beside_a_bad_field_says_to_choose_it_again(browser, cpu_worker):
    html = post_with_file(browser, b"one\ntwo\n", prompt_tokens="0").content.decode()
    field = field_block(html, "prompt_file")
    assert "prompts.txt was read (2 prompts)" in field and "choose it again" in field
    assert not Job.objects.exists()


def test_ten_thousand_prompts_are_accepted_within_the_request(browser, cpu_worker):
    system = "You are a support agent for ACME."
    lines = [f"{system} Ticket {i}: my order {i * 7} is late." for i in range(10_000)]
    content = ("\n".join(lines) + "\n").encode()
    started = time.perf_counter()
    response = post_with_file(browser, content, "tickets.txt")
    elapsed = time.perf_counter() - started
    assert response.status_code == 302
    sample = PromptSample.objects.get()
    assert sample.prompt_count == 10_000 and sample.prompts[9_999] == lines[9_999]
    # Parsing only (analysis is the worker's): far under a second on an idle machine;
    # the bound leaves room for two busy shared cores.
    assert elapsed < 5.0, f"{elapsed:.2f} s"


@pytest.mark.django_db(transaction=True)  # real commits, as in production
def test_the_job_is_published_only_once_its_sample_is_committed(browser, cpu_worker, monkeypatch):
    seen: list[int] = []

    def publish(job: Job) -> None:  # what a worker on another machine would find
        seen.append(PromptSample.objects.filter(job_id=job.pk).count())

    monkeypatch.setattr("advisor.jobs.dispatch._publish_new", publish)
    assert post_with_file(browser, b"a\nb\n").status_code == 302
    assert seen == [1]


# Prefix caching and parallelism: the report -----------------------------------------


def caching_report(client: Client, demo_result: dict[str, Any], **changes: Any) -> str:
    return report_html(client, with_caching(demo_result, caching_result(**changes)))


def parallel_report(client: Client, demo_result: dict[str, Any], **changes: Any) -> str:
    return report_html(client, with_parallel(demo_result, parallel_result(**changes)))


def table_rows(html: str, table_id: str) -> list[str]:
    table = html.split(f'id="{table_id}"')[1].split("</table>")[0]
    return table.split("<tbody>")[1].split("</tr>")[:-1]


def test_a_report_without_caching_or_parallel_has_no_such_sections(browser, demo_result):
    html = report_html(browser, demo_result)
    assert 'id="caching"' not in html and 'id="parallel"' not in html
    assert "chart-caching" not in html and "chart-interference" not in html


def test_the_caching_section_shows_the_finding_chart_and_sweep(browser, demo_result):
    html = caching_report(browser, demo_result)
    section = html.split('<section id="caching">')[1].split("</section>")[0]
    assert "Your prompts share 61 % of their tokens" in section  # capitalised finding
    assert '<script id="chart-caching" type="application/json">' in section
    rows = table_rows(section, "cache-sweep")
    assert len(rows) == 5
    half = rows[2]
    for cell in ("256", "50.0 %", "200 ms", "110 ms", "0.55×", "45.0 % less", "0.786 MB", "✓"):
        assert cell in half, cell
    assert ">same<" in rows[0]  # warm/cold 1.00
    assert "✗" not in section and 'id="cache-mismatch-banner"' not in section
    shared = table_rows(section, "cache-shared")
    assert len(shared) == 1 and "180 ms" in shared[0] and "12.5 %" in shared[0]
    turns = table_rows(section, "cache-turns")
    assert len(turns) == 3 and "408" in turns[2] and "150 ms" in turns[2]
    assert "prefix 0 tokens cold is noisy" in section


def test_the_users_prompts_show_reuse_hit_rate_histogram_and_saving(browser, demo_result):
    html = caching_report(browser, demo_result)
    sample = html.split('id="cache-sample"')[1].split("</dl>")[0]
    for text in ("12", "736", "452", "61.4 %", "91.7 % of prompts", "0.872 MB"):
        assert text in sample, text
    saving = sample.split('id="cache-sample-saving"')[1]
    assert "200 ms cold" in saving and "90.0 ms" in saving and "55.0 % less" in saving
    assert '<script id="chart-caching-sample" type="application/json">' in html
    assert 'id="cache-sample-empty"' not in html


def test_without_a_sample_the_section_says_how_to_add_one(browser, demo_result):
    html = caching_report(browser, demo_result, prompt_sample=None, finding="")
    empty = html.split('id="cache-sample-empty"')[1].split("</div>")[0]
    assert "No prompt sample was given" in empty and "--prompts FILE" in empty
    assert 'href="/"' in empty
    assert "chart-caching-sample" not in html


def test_without_a_shared_prefix_it_says_how_to_set_one(browser, demo_result):
    html = caching_report(
        browser, demo_result, shared_prefix=None, shared_prefix_requested_tokens=0
    )
    assert 'id="cache-shared"' not in html
    assert "Shared-prefix tokens" in html.split('id="cache-no-shared"')[1]


def test_a_point_whose_outputs_differ_is_flagged_on_its_row_and_in_a_banner(browser, demo_result):
    sweep = caching_result().prefix_sweep
    sweep[3] = point(384, 0.070, match=False)
    html = caching_report(browser, demo_result, prefix_sweep=sweep)
    banner = html.split('id="cache-mismatch-banner"')[1].split("</div>")[0]
    assert "Outputs differ with a reused cache at 1 point:" in banner
    rows = table_rows(html, "cache-sweep")
    assert 'class="cache-point mismatch' in rows[3] and "✗ outputs differ" in rows[3]
    assert all("✗" not in row for i, row in enumerate(rows) if i != 3)


def test_the_parallel_section_shows_plans_with_the_fewest_that_fit(browser, demo_result):
    html = parallel_report(browser, demo_result)
    section = html.split('<section id="parallel">')[1].split("</section>")[0]
    assert "The fewest L4 GPUs that hold 8 requests × 4096 tokens: 2" in section
    assert "A prefill of 256 tokens joining" not in section.split("<h3>")[0]  # shown below
    basis = section.split('id="parallel-basis"')[1].split("</p>")[0]
    assert "measured" in basis and "checked them against the real split" in basis
    rows = table_rows(section, "parallel-plans")
    assert [re.findall(r'<td class="num">(\d+)</td>', r)[:3] for r in rows] == [
        ["1", "1", "1"], ["2", "1", "2"], ["1", "2", "2"], ["4", "1", "4"],
    ]  # fmt: skip
    assert "✗" in rows[0] and "weights alone exceed the device" in rows[0]
    assert 'class="plan fewest"' in rows[1] and "fewest devices that fit" in rows[1]
    assert "4.00 GB" in rows[1] and "2.00 GB" in rows[1] and "6.00 GB" in rows[1]
    assert "fewest" not in rows[2]  # as few devices, but not the one the library chose


def test_the_measured_tp_run_shows_per_rank_weights_ratios_and_outputs(browser, demo_result):
    html = parallel_report(browser, demo_result)
    measured = html.split('id="tp-measured"')[1].split("</table>")[0]
    assert measured.count("Weights, rank") == 2 and "1.9× smaller" in measured
    assert "4.20 MB" in measured and "8.07 MB" in measured
    assert "30.0 ms" in measured and "20.0 ms" in measured and "1.50×" in measured
    assert "1.5× slower" in measured
    assert "✓" in measured and "0.00000200" in measured


def test_a_tp_run_that_was_skipped_or_failed_gives_its_reason(browser, demo_result):
    skipped = MeasuredTP(status="skipped", reason=SKIPPED_REASON)
    html = parallel_report(browser, demo_result, measured=skipped)
    note = html.split('id="tp-not-measured"')[1].split("</p>")[0]
    assert "not run" in note and escape(SKIPPED_REASON) in note
    assert "estimated from shapes" in html.split('id="parallel-basis"')[1].split("</p>")[0]
    failed = MeasuredTP(status="failed", reason="torchrun failed: exit 1")
    html = parallel_report(browser, demo_result, measured=failed)
    assert 'class="note warn" id="tp-not-measured"' in html
    assert "torchrun failed: exit 1" in html


def test_tp_outputs_that_differ_are_flagged(browser, demo_result):
    html = parallel_report(browser, demo_result, measured=measured_tp(greedy_tokens_match=False))
    measured = html.split('id="tp-measured"')[1].split("</table>")[0]
    assert "✗ outputs differ" in measured and "greedy tokens differ" in measured


def test_disaggregation_shows_interference_ratio_and_kv_transfer(browser, demo_result):
    html = parallel_report(browser, demo_result)
    assert '<script id="chart-interference" type="application/json">' in html
    split = html.split('id="disaggregation"')[1].split("</dl>")[0]
    assert "20.0 ms alone → 80.0 ms" in split and "(4.0×)" in split
    assert '<strong class="big" id="pd-ratio">1 prefill : 3 decode</strong>' in split
    transfer = split.split('id="kv-transfer"')[1].split("</dd>")[0]
    assert "1.57 MB" in transfer and "0.00870 ms" in transfer and "NVLink 4" in transfer
    assert "180 GB/s" in transfer
    assert 'mixed <span class="bad">missed</span>' in split


def test_kv_transfer_without_a_link_says_how_to_get_one(browser, demo_result):
    result = parallel_result()
    result.disaggregation.kv_transfer_seconds = result.disaggregation.link = None
    html = report_html(browser, with_parallel(demo_result, result))
    transfer = html.split('id="kv-transfer"')[1].split("</dd>")[0]
    assert "1.57 MB" in transfer and "choose a target GPU" in transfer


def test_script_in_warnings_notes_and_reasons_is_escaped(browser, demo_result):
    attack = "<script>alert(1)</script>"
    caching = caching_result(warnings=[attack], finding=f"finding {attack}")
    parallel = parallel_result(
        measured=MeasuredTP(status="failed", reason=attack),
        notes=[f"note {attack}"], warnings=[f"warning {attack}"],
    )  # fmt: skip
    parallel.plans[0].note = attack
    parallel.disaggregation.link = attack
    result = with_parallel(with_caching(demo_result, caching), parallel)
    html = report_html(browser, result)
    assert attack not in html
    escaped = escape(attack)
    assert html.count(escaped) >= 6
    for where in ('id="caching"', 'id="parallel-plans"', 'id="tp-not-measured"'):
        assert escaped in html.split(where)[1]


def test_a_real_cli_result_renders_both_sections(browser):
    result = json.loads((FIXTURES / "cli_caching_parallel.json").read_text())
    html = report_html(browser, result)
    for part in ('id="caching"', 'id="parallel"', 'id="cache-sweep"', 'id="parallel-plans"',
                 'id="cache-sample"', 'id="disaggregation"', 'id="tp-not-measured"'):  # fmt: skip
        assert part in html, part
    assert len(table_rows(html, "cache-sweep")) == len(result["caching"]["prefix_sweep"])
    assert len(table_rows(html, "parallel-plans")) == len(result["parallel"]["plans"])
    assert escape(result["disaggregation"]["workers"]) in html
    for chart in ("chart-caching", "chart-caching-sample", "chart-interference"):
        assert f'<script id="{chart}" type="application/json">' in html
