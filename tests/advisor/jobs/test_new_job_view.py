"""The new-job page through a CSRF-enforcing client: the form, its fieldsets, uploads."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from advisor.jobs.models import Job, PromptSample, Worker
from advisor.jobs.ownership import SESSION_KEY
from profiling.config import PROMPT_SAMPLE_MAX_BYTES
from tests.advisor.formdata import CSRF_INPUT
from tests.advisor.pages import (
    field_block,
    form_data,
    make_job,
    post_form,
    post_with_file,
)

pytestmark = pytest.mark.django_db


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


def test_the_form_page_has_the_speculative_fieldset(browser, cpu_worker):
    html = browser.get("/").content.decode()
    assert "<legend>Speculative decoding</legend>" in html
    assert 'id="field-spec_ks"' in html and 'id="field-draft_model"' in html


def test_a_bad_k_is_shown_next_to_its_field(browser, cpu_worker):
    html = post_form(browser, run_speculative="on", spec_ks="17").content.decode()
    field = html.split('id="field-spec_ks"')[1].split("</div>")[0]
    assert "from 1 to 16" in field


def test_the_form_page_has_the_quantization_fieldset_with_its_default_ticks(browser, cpu_worker):
    html = browser.get("/").content.decode()
    fieldset = html.split('id="quantization-fields"')[1].split('id="speculative-fields"')[0]
    assert "<legend>Quantization</legend>" in fieldset
    ticked = re.findall(r'name="precisions" value="([^"]+)"[^>]*checked', fieldset)
    assert ticked == ["fp32", "int8", "int4"]
    assert 'name="quant_variants" value="lm_head"' in html


def test_too_few_precisions_are_shown_next_to_their_field(browser, cpu_worker):
    html = post_form(browser, run_quantization="on", precisions=["int8"]).content.decode()
    field = html.split('id="field-precisions"')[1].split("</fieldset>")[0]
    assert "at least 2 precisions" in field
    assert not Job.objects.exists()


def test_quantization_choices_are_saved_from_the_browser(browser, cpu_worker):
    response = post_form(
        browser, run_quantization="on", precisions=["int8", "bf16"], quant_variants=["embeddings"]
    )
    assert response.status_code == 302
    job = Job.objects.get()
    assert (job.run_quantization, job.precisions, job.quant_variants) == (
        True, ["bf16", "int8"], ["embeddings"],
    )  # fmt: skip


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
    assert "The prompt file is 16.0 MiB; the limit is 16.0 MiB" in field
    assert "big" in html and not Job.objects.exists()


def test_a_good_file_beside_a_bad_field_says_to_choose_it_again(browser, cpu_worker):
    html = post_with_file(browser, b"one\ntwo\n", prompt_tokens="0").content.decode()
    field = field_block(html, "prompt_file")
    assert "prompts.txt was read (2 prompts)" in field and "choose it again" in field
    assert not Job.objects.exists()


def test_ten_thousand_prompts_are_accepted_within_the_request(browser, cpu_worker, monkeypatch):
    def not_in_the_request(*args, **kwargs):
        pytest.fail("the request tokenized or analysed the sample: that is the worker's work")

    # Parsing only: tokenizing and the reuse analysis happen on the worker.
    monkeypatch.setattr("profiling.caching.experiment.tokenize_sample", not_in_the_request)
    monkeypatch.setattr("profiling.caching.reuse.analyse", not_in_the_request)
    system = "You are a support agent for ACME."
    lines = [f"{system} Ticket {i}: my order {i * 7} is late." for i in range(10_000)]
    content = ("\n".join(lines) + "\n").encode()
    response = post_with_file(browser, content, "tickets.txt")
    assert response.status_code == 302
    sample = PromptSample.objects.get()
    assert sample.prompt_count == 10_000 and sample.prompts[9_999] == lines[9_999]


@pytest.mark.django_db(transaction=True)  # real commits, as in production
def test_the_job_is_published_only_once_its_sample_is_committed(browser, cpu_worker, monkeypatch):
    seen: list[int] = []

    def publish(job: Job) -> None:  # what a worker on another machine would find
        seen.append(PromptSample.objects.filter(job_id=job.pk).count())

    monkeypatch.setattr("advisor.jobs.dispatch._publish_new", publish)
    assert post_with_file(browser, b"a\nb\n").status_code == 302
    assert seen == [1]
