from __future__ import annotations

from django.urls import path, re_path

from advisor.api import views

app_name = "api"

urlpatterns = [
    # /api/v1/
    path("openapi.json", views.openapi, name="openapi"),
    path("jobs", views.jobs, name="jobs"),
    path("jobs/<str:token>", views.job, name="job"),
    path("jobs/<str:token>/result", views.job_result, name="job-result"),
    # Anything else under /api/v1/: a JSON 404, never the site's HTML page.
    re_path(r"^.*$", views.not_found, name="not-found"),
]
