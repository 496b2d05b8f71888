"""Top-level URLs: the admin, the JSON API, then the jobs and reports apps (namespaced)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from advisor.health import health
from advisor.jobs import urls as jobs_urls
from advisor.reports.job_page import job_detail

# The job page shows the report, so its view lives in the reports app; its URL
# and name belong to the jobs (the share link is /jobs/<token>/, "jobs:detail").
jobs_patterns = [
    *jobs_urls.urlpatterns,
    path("jobs/<str:token>/", job_detail, name="detail"),
]

# Any exception a view or middleware raises lands here: a database outage answers 503
# with Retry-After (`advisor.outage`), anything else Django's 500.
handler500 = "advisor.outage.server_error"

urlpatterns = [
    # /health
    path("health", health, name="health"),
    # /admin/
    path("admin/", admin.site.urls),
    # /api/v1/...
    path("api/v1/", include("advisor.api.urls")),
    # /reports/...
    path("reports/", include("advisor.reports.urls")),
    # /, /jobs/...
    path("", include((jobs_patterns, jobs_urls.app_name))),
]
