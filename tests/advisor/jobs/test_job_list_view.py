"""Recent jobs: the jobs this browser session submitted."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from advisor.jobs.models import Job
from advisor.jobs.ownership import SESSION_KEY
from tests.advisor.pages import (
    make_job,
    own,
)

pytestmark = pytest.mark.django_db


def test_recent_jobs_has_a_helpful_empty_state(browser):
    html = browser.get(reverse("jobs:list")).content.decode()
    assert "Nothing profiled from this browser yet" in html
    assert reverse("jobs:new") in html


def test_recent_jobs_lists_only_this_sessions_jobs(browser):
    mine, theirs = make_job(model_name="demo"), make_job(model_name="demo-draft")
    own(browser, mine)
    html = browser.get(reverse("jobs:list")).content.decode()
    assert mine.share_token in html and theirs.share_token not in html


def test_jobs_scripts_submitted_are_listed_with_where_they_came_from(browser, settings):
    settings.ADVISOR_API_TOKEN = ""
    api = make_job(model_name="demo", origin=Job.Origin.API)
    cli = make_job(model_name="demo-draft", origin=Job.Origin.CLI)
    someone_elses = make_job(model_name="demo")  # a browser's job, not this one's
    html = browser.get(reverse("jobs:list")).content.decode()
    assert api.share_token in html and cli.share_token in html
    assert someone_elses.share_token not in html
    assert "from the JSON API" in html and "from the command line (submit_job)" in html


def test_with_an_access_token_scripts_jobs_need_it_given(browser, settings):
    from advisor.jobs.access import SESSION_KEY as GRANTED

    settings.ADVISOR_API_TOKEN = "t" * 40
    api = make_job(model_name="demo", origin=Job.Origin.API)
    assert api.share_token not in browser.get(reverse("jobs:list")).content.decode()
    session = browser.session
    session[GRANTED] = True  # what the form stores once the token is given
    session.save()
    assert api.share_token in browser.get(reverse("jobs:list")).content.decode()


def own_all(client, *jobs) -> None:
    session = client.session
    session[SESSION_KEY] = [job.share_token for job in jobs]
    session.save()


def rendered_rows(response) -> int:
    return sum(t.name == "jobs/_row.html" for t in response.templates)


def test_finished_rows_are_rendered_once_and_running_rows_every_time(browser):
    done = make_job(model_name="done-model", state=Job.State.SUCCEEDED, finished_at=timezone.now())
    running = make_job(model_name="running-model", state=Job.State.RUNNING)
    own_all(browser, done, running)
    first = browser.get(reverse("jobs:list"))
    assert rendered_rows(first) == 2
    second = browser.get(reverse("jobs:list"))
    assert rendered_rows(second) == 1  # the running row only
    assert second.content == first.content


def test_a_row_follows_its_job_to_the_end(browser):
    job = make_job(state=Job.State.RUNNING)
    own(browser, job)
    assert "state-running" in browser.get(reverse("jobs:list")).content.decode()
    Job.objects.filter(pk=job.pk).update(state=Job.State.FAILED, finished_at=timezone.now())
    html = browser.get(reverse("jobs:list")).content.decode()
    assert "state-failed" in html and "state-running" not in html


def test_kept_rows_gain_the_compare_box_when_a_second_job_appears(browser):
    first = make_job(state=Job.State.SUCCEEDED, finished_at=timezone.now())
    own(browser, first)
    assert 'name="pick"' not in browser.get(reverse("jobs:list")).content.decode()
    second = make_job(state=Job.State.SUCCEEDED, finished_at=timezone.now())
    own_all(browser, first, second)
    html = browser.get(reverse("jobs:list")).content.decode()
    assert html.count('name="pick"') == 2


def test_only_the_latest_scripts_jobs_are_listed(browser, settings):
    from advisor.jobs.ownership import MAX_REMEMBERED

    settings.ADVISOR_API_TOKEN = ""
    jobs = [make_job(model_name="demo", origin=Job.Origin.API) for _ in range(MAX_REMEMBERED + 1)]
    html = browser.get(reverse("jobs:list")).content.decode()
    assert jobs[0].share_token not in html  # the oldest
    assert all(job.share_token in html for job in jobs[1:])
