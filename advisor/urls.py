"""Top-level URLs: the admin, the JSON API, then the jobs and reports apps (namespaced)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from advisor.health import health

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
    path("", include("advisor.jobs.urls")),
]
