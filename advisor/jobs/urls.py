from __future__ import annotations

from django.urls import path

from advisor.jobs import views

app_name = "jobs"

urlpatterns = [
    # /
    path("", views.new_job, name="new"),
    # /jobs/
    path("jobs/", views.job_list, name="list"),
    path("jobs/<str:token>/", views.job_detail, name="detail"),
    path("jobs/<str:token>/status", views.job_status, name="status"),
    path("jobs/<str:token>/cancel", views.job_cancel, name="cancel"),
    path("jobs/<str:token>/result.json", views.job_result_json, name="result-json"),
]
