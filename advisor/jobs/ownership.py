"""Which jobs this browser session submitted.

There are no user accounts: the session that created a job is its owner. It
may cancel the job and sees it under "Recent jobs"; anyone else holding the
share link gets a read-only page. The session stores share tokens only, newest
first, capped so a busy session cannot grow its cookie row without bound.

Jobs that scripts submit (the JSON API, `manage.py submit_job`) have no
browser session. "Recent jobs" lists the latest of them, marked with where
they came from, to every browser that may submit jobs itself: everyone on a
site without ADVISOR_API_TOKEN, else a session that gave the token. Only the
browser that submitted a job may cancel it.
"""

from __future__ import annotations

from django.db.models import Q
from django.http import HttpRequest

from advisor.jobs.access import SESSION_KEY as GRANTED
from advisor.jobs.models import Job
from advisor.jobs.submission import token_required

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
    """This session's jobs and, where it may see them, the latest jobs scripts
    submitted; newest first; forgotten rows simply drop out.

    `fields` names the only columns to load (all but the result and error by default).
    """
    jobs = Job.objects.only(*fields) if fields else Job.objects.listed()
    chosen = Q(share_token__in=owned_tokens(request))
    if sees_scripts_jobs(request):
        scripts = Job.objects.filter(origin__in=SCRIPT_ORIGINS).order_by("-created_at")
        chosen |= Q(pk__in=scripts.values("pk")[:MAX_REMEMBERED])  # a subquery: one round trip
    return list(jobs.filter(chosen).order_by("-created_at"))


SCRIPT_ORIGINS = (Job.Origin.API, Job.Origin.CLI)


def sees_scripts_jobs(request: HttpRequest) -> bool:
    """Whether this browser may see jobs scripts submitted: it could submit them itself."""
    return not token_required() or bool(request.session.get(GRANTED))
