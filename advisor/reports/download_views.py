"""Downloads of a report beyond result.json: every repeated measurement as CSV."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from advisor.jobs.downloads import attachment
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
    return attachment(response, job, "measurements", "csv")
