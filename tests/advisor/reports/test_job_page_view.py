"""The job page before its report, its status JSON, cancel and result.json."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from advisor.jobs.conversation_upload import conversations_from_upload
from advisor.jobs.models import ConversationFile, Job, PromptSample
from advisor.jobs.samples import sample_from_upload
from profiling import units
from tests.advisor.jobs.test_conversation_upload import CHATS
from tests.advisor.pages import (
    csrf_token,
    make_job,
    own,
)

pytestmark = pytest.mark.django_db


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


def test_status_is_small_json(browser):
    job = make_job(state=Job.State.RUNNING, progress=0.25, phase="prefill", message="batch 1")
    response = browser.get(reverse("jobs:status", args=[job.share_token]))
    assert response.status_code == 200
    assert response.json() == {
        "state": "running", "state_label": "Running", "progress": 0.25,
        "phase": "prefill", "message": "batch 1", "final": False,
        "elapsed_seconds": None, "eta_seconds": None,  # no attempt start recorded
    }  # fmt: skip
    assert "no-cache" in response["Cache-Control"]
    assert browser.get("/jobs/nope/status").status_code == 404


def test_a_running_jobs_status_says_how_long_is_left_at_its_pace(browser):
    from datetime import timedelta

    from django.utils import timezone

    started = timezone.now() - timedelta(seconds=20)
    job = make_job(state=Job.State.RUNNING, progress=0.25, started_at=started)
    status = browser.get(reverse("jobs:status", args=[job.share_token])).json()
    assert status["elapsed_seconds"] == pytest.approx(20, abs=2)
    assert status["eta_seconds"] == pytest.approx(60, abs=6)  # 25 % in 20 s: 75 % in 60 s
    early = make_job(state=Job.State.RUNNING, progress=0.02, started_at=started)
    assert (
        browser.get(reverse("jobs:status", args=[early.share_token])).json()["eta_seconds"] is None
    )
    done = make_job(state=Job.State.SUCCEEDED, progress=1.0, started_at=started)
    assert (
        browser.get(reverse("jobs:status", args=[done.share_token])).json()["eta_seconds"] is None
    )


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


# The files sent with a job, listed from the start ---------------------------------------

PROMPTS = b"SECRET-PROMPT-1 what is a KV cache?\nSECRET-PROMPT-2 and a prefix?\n"


def send_files(job: Job, chats: bytes = CHATS) -> None:
    """Keep `chats` and PROMPTS with `job` as the form does: rows from the upload checks."""
    for upload in (
        conversations_from_upload(SimpleUploadedFile("chats.jsonl", chats)),
        sample_from_upload(SimpleUploadedFile("prompts.txt", PROMPTS)),
    ):
        upload.job = job
        upload.save()


def shown(html: str, anchor: str) -> str:
    listed = html.split('id="uploads"')[1].split("</section>")[0]
    return listed.split(f'id="{anchor}"')[1].split("</dd>")[0]


@pytest.mark.parametrize("state", [Job.State.QUEUED, Job.State.RUNNING, Job.State.FAILED])
def test_the_page_lists_the_files_sent_with_the_job_before_any_result(browser, state):
    job = make_job(state=state, error="lost" if state == Job.State.FAILED else "")
    send_files(job)
    html = browser.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    chats = shown(html, "conversation-file")
    assert "chats.jsonl · 2 conversations · 3 turns · " in chats
    assert chats.endswith(units.size(len(CHATS)))
    sample = shown(html, "prompt-sample")
    assert sample.endswith(f"prompts.txt · 2 prompts · {units.size(len(PROMPTS))}")
    # Names and counts only: neither file's contents reach the page.
    assert "What is a KV cache?" not in html and "SECRET-PROMPT" not in html


def test_one_conversation_of_one_turn_is_said_in_the_singular(browser):
    job = make_job()
    send_files(job, b'{"messages": [{"role": "user", "content": "hi"}]}\n')
    html = browser.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    assert "chats.jsonl · 1 conversation · 1 turn · " in shown(html, "conversation-file")


def test_a_job_without_files_lists_none(browser):
    job = make_job(state=Job.State.RUNNING)
    html = browser.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    assert 'id="uploads"' not in html


def test_the_uploads_listed_leave_the_files_contents_unloaded():
    job = make_job()
    send_files(job)
    sample, chats = job.uploads()
    assert (type(sample), type(chats)) == (PromptSample, ConversationFile)
    assert sample.get_deferred_fields() == {"prompts"}
    assert chats.get_deferred_fields() == {"text"}
    assert (chats.conversation_count, chats.turn_count) == (2, 3)
