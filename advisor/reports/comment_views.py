"""Comments under a shared report: anyone holding the share link may post.

The form is CSRF protected like every other POST; the lengths are the model's
and checked here on the server; one post per session per
ADVISOR_COMMENT_EVERY_S keeps a stuck button or a loop from flooding a thread.
"""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from advisor.jobs.lookup import find_job
from advisor.jobs.views import detail_context
from advisor.reports.forms import CommentForm

TOO_SOON = "You just posted a comment: wait a few seconds before the next one."


def posted_recently(request: HttpRequest) -> bool:
    """True if this session posted within the interval; else marks it as posting now."""
    if settings.ADVISOR_COMMENT_EVERY_S <= 0:
        return False
    if request.session.session_key is None:
        request.session.save()  # a key of its own, even for a first-time visitor
    key = f"advisor:comments:posted:{request.session.session_key}"
    return not cache.add(key, True, timeout=settings.ADVISOR_COMMENT_EVERY_S)


@require_POST
def add_comment(request: HttpRequest, token: str) -> HttpResponse:
    job = find_job(token)
    if job is None:
        return render(request, "jobs/missing.html", status=404)
    form = CommentForm(request.POST)
    status = 400
    if form.is_valid():
        if not posted_recently(request):
            form.instance.job = job
            form.save()
            return redirect(reverse("jobs:detail", args=[job.share_token]) + "#comments")
        form.add_error(None, TOO_SOON)
        status = 429
    context = {**detail_context(request, job), "comment_form": form}
    return render(request, "jobs/detail.html", context, status=status)
