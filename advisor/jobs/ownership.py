"""Which jobs this browser session submitted.

There are no user accounts: the session that created a job is its owner. It
may cancel the job and sees it under "Recent jobs"; anyone else holding the
share link gets a read-only page. The session stores share tokens only, newest
first, capped so a busy session cannot grow its cookie row without bound.
"""

from __future__ import annotations

from django.http import HttpRequest

from advisor.jobs.models import Job

SESSION_KEY = "advisor_job_tokens"
MAX_REMEMBERED = 50


def owned_tokens(request: HttpRequest) -> list[str]:
    tokens = request.session.get(SESSION_KEY, [])
    # A tampered or stale session value must not break a page.
    return [t for t in tokens if isinstance(t, str)] if isinstance(tokens, list) else []


def remember(request: HttpRequest, job: Job) -> None:
    """Record that this session submitted `job`."""
    tokens = [t for t in owned_tokens(request) if t != job.share_token]
    request.session[SESSION_KEY] = [job.share_token, *tokens][:MAX_REMEMBERED]


def owns(request: HttpRequest, job: Job) -> bool:
    return job.share_token in owned_tokens(request)


def owned_jobs(request: HttpRequest, fields: tuple[str, ...] = ()) -> list[Job]:
    """This session's jobs, newest first; forgotten rows simply drop out.

    `fields` names the only columns to load (all but the result and error by default).
    """
    jobs = Job.objects.only(*fields) if fields else Job.objects.listed()
    owned = jobs.filter(share_token__in=owned_tokens(request))
    return list(owned.order_by("-created_at"))
