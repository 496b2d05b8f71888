from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Job and Worker rows, dispatch to Celery, the task that runs a profile."""

    name = "advisor.jobs"
    label = "jobs"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Profiling jobs"

    def ready(self) -> None:
        # Connects the worker announcement signal handlers (worker side only).
        from advisor.jobs import workers  # noqa: F401
