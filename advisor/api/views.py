"""JSON views for scripts: submit through the new-job form's checks, follow, fetch.

A submit is read strictly first (`advisor.jobs.request`: JSON types, sizes,
depth, storable text), then checked by the new-job form. CSRF does not apply
(no cookies are involved). When ADVISOR_API_TOKEN is set, a submit must carry
`Authorization: Bearer <token>`, as the form asks for it; reading a job never
needs it, as reading a share link does not. Every answer is JSON, errors too.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from advisor import limits
from advisor.api.openapi import document
from advisor.jobs import dispatch, submission
from advisor.jobs.lookup import find_job
from advisor.jobs.models import Job
from profiling.units import size

View = Callable[..., HttpResponse]
QUEUE_DOWN = "The job queue is unavailable right now, so the job was not submitted"


def error(status: int, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


def bearer(request: HttpRequest) -> str:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return given.strip() if scheme.lower() == "bearer" else ""


def authorized(request: HttpRequest) -> bool:
    """Whether this request may create a job (reads need no token)."""
    return submission.token_accepted(bearer(request))


def api_view(*methods: str) -> Callable[[View], View]:
    """CSRF-exempt, method-checked, token-checked for writes; never cached."""

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in methods:
                response = error(405, f"Use {' or '.join(methods)} here.")
                response["Allow"] = ", ".join(methods)
                return response
            if request.method == "POST" and not authorized(request):
                response = error(401, "Send the API token: Authorization: Bearer <token>.")
                response["WWW-Authenticate"] = 'Bearer realm="advisor"'
                return response
            return view(request, *args, **kwargs)

        return csrf_exempt(never_cache(wrapper))

    return decorate


def job_json(request: HttpRequest, job: Job) -> dict[str, Any]:
    def url(name: str, *args: str) -> str:
        return request.build_absolute_uri(reverse(name, args=args))

    def when(value: Any) -> str | None:
        return value.isoformat() if value else None

    token = job.share_token
    return {
        "token": token,
        "state": job.state,
        "final": job.is_final,
        "progress": max(0.0, min(1.0, job.progress)),
        "phase": job.phase,
        "message": job.message,
        "error": job.error,
        "model_name": job.model_name,
        "queue": job.queue,
        "created_at": when(job.created_at),
        "started_at": when(job.started_at),
        "finished_at": when(job.finished_at),
        "links": {
            "self": url("api:job", token),
            "result": url("api:job-result", token),
            "report": url("jobs:detail", token),
        },
    }


@api_view("POST")
def jobs(request: HttpRequest) -> HttpResponse:
    # A browser cannot send this type cross-site without a CORS preflight (which
    # this site never grants), so another site's page cannot submit through a
    # visitor's browser, e.g. to a site only reachable on an internal network.
    if request.content_type != "application/json":
        return error(415, "Send the job as JSON, with Content-Type: application/json.")
    values = read_object(request)
    if isinstance(values, HttpResponse):
        return values
    form, errors = submission.check(values)
    if form is None:
        return JsonResponse({"errors": errors}, status=400)
    limited = limits.submission_limited(request)
    if limited is not None:
        response = error(429, limited.message())
        response["Retry-After"] = str(limited.retry_after_s)
        return response
    try:
        job = submission.submit(form, Job.Origin.API)
    except dispatch.QueueUnavailable as exc:
        return error(503, f"{QUEUE_DOWN} ({exc}). Try again in a moment.")
    response = JsonResponse(job_json(request, job), status=201)
    response["Location"] = reverse("api:job", args=[job.share_token])
    return response


def read_object(request: HttpRequest) -> dict[str, Any] | HttpResponse:
    """The body as a JSON object, or the JSON error that says why it is not one."""
    limit = settings.ADVISOR_API_MAX_BODY_BYTES
    try:
        declared = int(request.headers.get("Content-Length") or 0)
        body = b"" if declared > limit else request.body
    except (ValueError, RequestDataTooBig):
        declared, body = limit + 1, b""
    if declared > limit or len(body) > limit:
        return error(413, f"The body is over {size(limit)}, the most a job request takes.")
    try:
        values = json.loads(body or b"null")
    except RecursionError:
        return _body_error("The body is nested too deeply; a job request is a flat object.")
    except (ValueError, UnicodeDecodeError):
        values = None
    if not isinstance(values, dict):
        return _body_error("The body must be a JSON object.")
    return values


def _body_error(message: str) -> JsonResponse:
    return JsonResponse({"errors": {"__all__": [message]}}, status=400)


@api_view("GET")
def job(request: HttpRequest, token: str) -> HttpResponse:
    found = find_job(token)
    if found is None:
        return error(404, "No job has this token.")
    return JsonResponse(job_json(request, found))


@api_view("GET")
def job_result(request: HttpRequest, token: str) -> HttpResponse:
    found = find_job(token)
    if found is None:
        return error(404, "No job has this token.")
    if found.state != Job.State.SUCCEEDED or found.result is None:
        why = "has not finished yet" if not found.is_final else "ended without a result"
        return error(409, f"This job {why} ({found.state}).", state=found.state)
    return JsonResponse(found.result)


@csrf_exempt
def not_found(request: HttpRequest) -> HttpResponse:
    return error(404, "No such API path; see /api/v1/openapi.json.")


@require_GET
def openapi(request: HttpRequest) -> HttpResponse:
    server = request.build_absolute_uri(reverse("api:openapi")).removesuffix("/openapi.json")
    return JsonResponse(document(server), json_dumps_params={"indent": 2})
