"""Comments under a shared report: anyone holding the share link may post.

The form is CSRF protected like every other POST; the lengths are the model's
and checked here on the server. Limits per client address and per share link,
counted in the shared cache (`advisor.limits`), keep a loop or a stuck button
from flooding a thread, whichever process serves the post.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from advisor import limits
from advisor.jobs.lookup import find_job
from advisor.reports.forms import CommentForm
from advisor.reports.job_page import detail_context


@require_POST
def add_comment(request: HttpRequest, token: str) -> HttpResponse:
    job = find_job(token)
    if job is None:
        return render(request, "jobs/missing.html", status=404)
    form = CommentForm(request.POST)
    status, limited = 400, None
    if form.is_valid():
        limited = limits.comment_limited(request, job.share_token)
        if limited is None:
            form.instance.job = job
            form.save()
            return redirect(reverse("jobs:detail", args=[job.share_token]) + "#comments")
        form.add_error(None, limited.message())
        status = 429
    context = {**detail_context(request, job), "comment_form": form}
    response = render(request, "jobs/detail.html", context, status=status)
    if limited is not None:
        response["Retry-After"] = str(limited.retry_after_s)
    return response
