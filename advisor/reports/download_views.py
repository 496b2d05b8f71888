"""Downloads of a report beyond result.json: every repeated measurement as CSV."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.text import slugify
from django.views.decorators.http import require_GET

from advisor.jobs.lookup import find_job
from advisor.reports.views import load_profile
from profiling.export import measurements_csv


@require_GET
def measurements(request: HttpRequest, token: str) -> HttpResponse:
    job = find_job(token)
    profile = load_profile(job) if job is not None and job.result is not None else None
    if profile is None:
        return render(request, "jobs/missing.html", status=404)
    response = HttpResponse(measurements_csv(profile), content_type="text/csv; charset=utf-8")
    name = slugify(job.model_name.rsplit("/", 1)[-1]) or "model"
    response["Content-Disposition"] = (
        f'attachment; filename="measurements-{name}-{job.share_token[:8]}.csv"'
    )
    return response
