"""Report pages beyond the job page itself.

A finished job's report is served at its share link, `jobs:detail`; the pages
here compare two reports and take comments on one.
"""

from __future__ import annotations

from django.urls import path

from advisor.reports import comment_views, compare_views, download_views

app_name = "reports"

urlpatterns = [
    # /reports/compare/...
    path("compare/", compare_views.compare_pick, name="compare-pick"),
    path("compare/<str:token_a>/<str:token_b>/", compare_views.compare, name="compare"),
    # /reports/<token>/measurements.csv
    path("<str:token>/measurements.csv", download_views.measurements, name="measurements-csv"),
    # /reports/<token>/comments
    path("<str:token>/comments", comment_views.add_comment, name="comment"),
]
