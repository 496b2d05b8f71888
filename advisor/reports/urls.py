"""Report pages beyond the job page itself.

A finished job's report is served at its share link, `jobs:detail`; compare
and history pages will be added here, under /reports/.
"""

from __future__ import annotations

from django.urls import URLPattern

app_name = "reports"

urlpatterns: list[URLPattern] = []
