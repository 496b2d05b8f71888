"""The job page: a job's progress while it runs, then its report, and the comments.

Its URL is a job's (`jobs:detail`, `/jobs/<token>/`: the share link), its view
lives here, with the report it shows, so the jobs app never imports the
reports app (advisor/urls.py puts the two together under the jobs namespace).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from advisor.jobs import reaper
from advisor.jobs.lookup import find_job
from advisor.jobs.models import Job
from advisor.jobs.ownership import owns
from advisor.reports.forms import CommentForm
from advisor.reports.views import rendered_report


@require_GET
def job_detail(request: HttpRequest, token: str) -> HttpResponse:
    reaper.reap_if_due()
    job = find_job(token)
    if job is None:
        return render(request, "jobs/missing.html", status=404)
    return render(request, "jobs/detail.html", detail_context(request, job))


def detail_context(request: HttpRequest, job: Job) -> dict[str, Any]:
    """The job page's context (the comment view re-renders the page with it, too)."""
    share_url = request.build_absolute_uri(reverse("jobs:detail", args=[job.share_token]))
    context = {
        "job": job,
        "owner": owns(request, job),
        "share_url": share_url,
        "comments": job.comments.all(),
        "comment_form": CommentForm(),
    }
    if job.state == Job.State.SUCCEEDED:
        context.update(rendered_report(job, request.GET))
    return context
