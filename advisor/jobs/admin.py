"""Admin for Job (read-only result) and Worker rows."""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.html import format_html

from advisor.jobs.models import Job, Worker


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("model_name", "state", "progress_pct", "queue", "worker_host", "created_at")
    list_filter = ("state", "queue", "model_source")
    search_fields = ("model_name", "share_token", "worker_host", "error")
    date_hierarchy = "created_at"
    readonly_fields = (
        "share_token", "state", "progress", "phase", "message", "attempts", "cancel_requested",
        "dispatched_at", "started_at", "finished_at", "heartbeat_at", "worker_host", "child_pid",
        "device", "error", "result_pretty",
    )  # fmt: skip
    exclude = ("result",)

    @admin.display(description="progress", ordering="progress")
    def progress_pct(self, job: Job) -> str:
        return f"{job.progress:.0%}"

    @admin.display(description="result")
    def result_pretty(self, job: Job) -> str:
        if job.result is None:
            return "—"
        return format_html("<pre>{}</pre>", json.dumps(job.result, indent=2)[:200_000])


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):
    list_display = ("name", "host", "queues", "last_seen", "started_at")
    search_fields = ("name", "host", "queues")
    readonly_fields = ("name", "host", "queues", "devices", "started_at", "last_seen")
