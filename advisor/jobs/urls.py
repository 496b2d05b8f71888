from __future__ import annotations

from django.urls import path

from advisor.jobs import views

app_name = "jobs"

urlpatterns = [
    # /
    path("", views.new_job, name="new"),
    # /jobs/
    path("jobs/", views.job_list, name="list"),
    # jobs/<token>/ (name "detail"), the job page, is the report's: advisor/urls.py adds it.
    path("jobs/<str:token>/status", views.job_status, name="status"),
    path("jobs/<str:token>/cancel", views.job_cancel, name="cancel"),
    path("jobs/<str:token>/result.json", views.job_result_json, name="result-json"),
]
