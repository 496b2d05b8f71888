"""Comments under a shared report, through a CSRF-enforcing client and no account."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from advisor.jobs.models import Comment, Job
from tests.advisor.pages import csrf_token, make_job

pytestmark = pytest.mark.django_db

PAYLOAD = "<script>alert('owned')</script>"


@pytest.fixture
def job() -> Job:
    return make_job(state=Job.State.FAILED, error="out of memory")


def page(job: Job) -> str:
    return reverse("jobs:detail", args=[job.share_token])


def post(client: Client, job: Job, **data: str):
    token = csrf_token(client, page(job))
    url = reverse("reports:comment", args=[job.share_token])
    return client.post(url, {"author": "", "text": "", **data, "csrfmiddlewaretoken": token})


def field_block(html: str, name: str) -> str:
    """The field's own block: its input, help and errors."""
    start = html.index(f'id="field-{name}"')
    return html[start : html.index("</div>", start)]


def test_a_comment_is_posted_from_the_share_link_and_shown(browser, job):
    response = post(browser, job, author="Ada", text="Try int8 next.\nThen compare.")
    assert response.status_code == 302
    assert response["Location"] == page(job) + "#comments"
    comment = Comment.objects.get()
    assert (comment.job, comment.author) == (job, "Ada")
    assert comment.text == "Try int8 next.\nThen compare."
    html = Client().get(page(job)).content.decode()  # another visitor, no session
    thread = html[html.index('id="comments"') :]
    assert "Ada" in thread and "Try int8 next.<br>Then compare." in thread


def test_a_comment_without_a_name_is_anonymous(browser, job):
    assert post(browser, job, text="looks right").status_code == 302
    assert "Anonymous" in browser.get(page(job)).content.decode()


def test_script_in_a_comment_renders_as_text(browser, job):
    assert post(browser, job, author=PAYLOAD, text=PAYLOAD).status_code == 302
    html = browser.get(page(job)).content.decode()
    assert "<script>alert" not in html
    assert html.count(escape(PAYLOAD)) == 2


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("text", "x" * 2001, "at most 2000 characters (it has 2001)"),
        ("author", "y" * 81, "at most 80 characters (it has 81)"),
        ("text", "   ", "This field is required"),
    ],
)
def test_a_limit_is_enforced_with_the_error_next_to_the_field(browser, job, field, value, message):
    data = {"text": "fine", field: value}
    response = post(browser, job, **data)
    assert response.status_code == 400
    assert message in field_block(response.content.decode(), field)
    assert not Comment.objects.exists()


def test_the_longest_comment_is_accepted(browser, job):
    assert post(browser, job, author="a" * 80, text="x" * 2000).status_code == 302


def test_posting_without_the_csrf_token_is_refused(browser, job):
    browser.get(page(job))
    response = browser.post(reverse("reports:comment", args=[job.share_token]), {"text": "hi"})
    assert response.status_code == 403
    assert not Comment.objects.exists()


def test_posts_over_the_rate_from_one_address_are_refused(job, settings, rate_clock_stopped):
    settings.ADVISOR_COMMENT_RATE = "3/m"
    # Fresh clients without cookies each time: the limit is the address's, not a session's.
    for n in range(3):
        assert post(Client(enforce_csrf_checks=True), job, text=f"post {n}").status_code == 302
    response = post(Client(enforce_csrf_checks=True), job, text="one too many")
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "Too many comments from your address" in response.content.decode()
    assert Comment.objects.count() == 3
    elsewhere = Client(enforce_csrf_checks=True, REMOTE_ADDR="10.1.2.3")
    assert post(elsewhere, job, text="another address").status_code == 302


def test_a_thread_has_a_limit_of_its_own(job, settings, rate_clock_stopped):
    settings.ADVISOR_COMMENT_RATE, settings.ADVISOR_THREAD_RATE = "", "2/h"
    for n in range(2):
        client = Client(enforce_csrf_checks=True, REMOTE_ADDR=f"10.0.0.{n}")
        assert post(client, job, text=f"post {n}").status_code == 302
    late = post(Client(enforce_csrf_checks=True, REMOTE_ADDR="10.0.0.9"), job, text="late")
    assert late.status_code == 429 and "comments on this report" in late.content.decode()
    assert Comment.objects.count() == 2


def test_the_address_comes_from_the_trusted_proxy_header_when_set(
    job, settings, rate_clock_stopped
):
    settings.ADVISOR_COMMENT_RATE, settings.ADVISOR_CLIENT_IP_HEADER = "1/m", "X-Forwarded-For"
    first = Client(enforce_csrf_checks=True, headers={"X-Forwarded-For": "1.1.1.1, 10.0.0.1"})
    second = Client(enforce_csrf_checks=True, headers={"X-Forwarded-For": "1.1.1.1, 10.0.0.2"})
    assert post(first, job, text="one").status_code == 302
    assert post(second, job, text="two").status_code == 302  # another client behind the proxy
    assert post(first, job, text="three").status_code == 429


def test_with_no_rate_posts_are_not_limited(browser, job, settings):
    settings.ADVISOR_COMMENT_RATE = settings.ADVISOR_THREAD_RATE = ""
    for text in ("one", "two", "three"):
        assert post(browser, job, text=text).status_code == 302
    assert Comment.objects.count() == 3


@pytest.mark.postgres
def test_text_no_database_can_store_is_a_field_error(browser, job):
    response = post(browser, job, text="fine until \x00 here")
    assert response.status_code == 400
    assert "Null characters are not allowed" in response.content.decode()
    assert not Comment.objects.exists()


def test_an_unknown_job_or_a_get_is_refused(browser, job):
    token = csrf_token(browser, page(job))
    url = reverse("reports:comment", args=["A" * 22])
    assert browser.post(url, {"text": "hi", "csrfmiddlewaretoken": token}).status_code == 404
    assert browser.get(reverse("reports:comment", args=[job.share_token])).status_code == 405


def test_the_thread_is_under_a_finished_report_too(browser):
    job = make_job(state=Job.State.SUCCEEDED, result={"broken": True})
    Comment.objects.create(job=job, text="why is this unreadable?")
    html = browser.get(page(job)).content.decode()
    assert html.index('id="report"') < html.index('id="comments"')
    assert "why is this unreadable?" in html


def test_comments_are_in_the_admin():
    assert admin.site.is_registered(Comment)
