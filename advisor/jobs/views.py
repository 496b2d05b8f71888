"""Job pages: submit, recent jobs, the job page (progress, then the report), cancel.

Each view is access check → form or query → render/redirect. The share token
in the URL is the only key: anyone holding it reads the job; only the session
that submitted it may cancel.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from advisor import limits
from advisor.jobs import dispatch, reaper
from advisor.jobs.access import access_form, grant
from advisor.jobs.downloads import attachment
from advisor.jobs.forms import JobForm
from advisor.jobs.lookup import find_job
from advisor.jobs.models import Job
from advisor.jobs.ownership import owned_jobs, owns, remember, sees_scripts_jobs
from advisor.jobs.rows import ROW_FIELDS, job_rows
from advisor.jobs.submission import submit

QUEUE_DOWN = (
    "The job queue is unavailable right now, so the job was not submitted. "
    "Your input is kept below: try again in a moment."
)


def _missing(request: HttpRequest) -> HttpResponse:
    return render(request, "jobs/missing.html", status=404)


@require_http_methods(["GET", "POST"])
def new_job(request: HttpRequest) -> HttpResponse:
    reaper.reap_if_due()
    form = JobForm(request.POST, request.FILES) if request.method == "POST" else JobForm()
    access, limited = access_form(request), None
    allowed = access is None or access.is_valid()
    if form.is_bound and form.is_valid() and allowed:
        limited = limits.submission_limited(request)
        if limited is not None:
            form.add_error(None, limited.message())
        else:
            try:
                job = submit(form)  # published on commit, with the prompt sample
            except dispatch.QueueUnavailable as exc:
                form.add_error(None, f"{QUEUE_DOWN} ({exc})")
            else:
                if access is not None:
                    grant(request)
                remember(request, job)
                return redirect("jobs:detail", token=job.share_token)
    context = {"form": form, "access": access, "engines": form.engines}
    response = render(request, "jobs/new.html", context)
    if limited is not None:
        response.status_code = 429
        response["Retry-After"] = str(limited.retry_after_s)
    return response


@require_GET
def job_list(request: HttpRequest) -> HttpResponse:
    reaper.reap_if_due()
    rows = job_rows(owned_jobs(request, ROW_FIELDS))
    return render(
        request, "jobs/list.html", {"rows": rows, "scripts_visible": sees_scripts_jobs(request)}
    )


@never_cache
@require_GET
def job_status(request: HttpRequest, token: str) -> HttpResponse:
    reaper.reap_if_due()  # a watched job whose worker died is noticed here
    job = find_job(token)
    if job is None:
        return JsonResponse({"error": "no such job"}, status=404)
    progress = max(0.0, min(1.0, job.progress))
    elapsed, left = time_left(job, progress)
    return JsonResponse(
        {
            "state": job.state,
            "state_label": job.get_state_display(),
            "progress": progress,
            "phase": job.phase,
            "message": job.message,
            "final": job.is_final,
            "elapsed_seconds": elapsed,
            "eta_seconds": left,
        }
    )


# An ETA needs a little of the run behind it: before this much, it is a guess.
ETA_AFTER_PROGRESS, ETA_AFTER_SECONDS = 0.05, 3.0


def time_left(job: Job, progress: float) -> tuple[float | None, float | None]:
    """(seconds since the attempt started, seconds left at the pace so far) of a running
    job; the bar's fractions are shares of planned work, so its pace holds across phases."""
    if job.state != Job.State.RUNNING or job.started_at is None:
        return None, None
    elapsed = max(0.0, (timezone.now() - job.started_at).total_seconds())
    if progress < ETA_AFTER_PROGRESS or elapsed < ETA_AFTER_SECONDS:
        return elapsed, None
    return elapsed, elapsed * (1 - progress) / progress


@require_POST
def job_cancel(request: HttpRequest, token: str) -> HttpResponse:
    job = find_job(token)
    if job is None:
        return _missing(request)
    if not owns(request, job):
        return render(request, "jobs/forbidden.html", {"job": job}, status=403)
    if not job.is_final:
        dispatch.cancel(job)
    return redirect("jobs:detail", token=job.share_token)


@require_GET
def job_result_json(request: HttpRequest, token: str) -> HttpResponse:
    job = find_job(token)
    if job is None or job.result is None:
        return _missing(request)
    return attachment(JsonResponse(job.result, json_dumps_params={"indent": 2}), job,
                      "profile", "json")  # fmt: skip
