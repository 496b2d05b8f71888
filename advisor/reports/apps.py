from __future__ import annotations

from django.apps import AppConfig


class ReportsConfig(AppConfig):
    """Report pages and charts built from a job's stored Profile dict."""

    name = "advisor.reports"
    label = "reports"
