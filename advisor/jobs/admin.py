"""Admin for Job (read-only result), Worker and Comment rows."""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.html import format_html

from advisor.jobs.models import Comment, Job, Worker
from profiling.units import size


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("model_name", "state", "progress_pct", "queue", "worker_host", "created_at")
    list_filter = ("state", "queue", "model_source")
    search_fields = ("model_name", "share_token", "worker_host", "error")
    date_hierarchy = "created_at"
    readonly_fields = (
        "share_token", "state", "progress", "phase", "message", "attempts", "cancel_requested",
        "dispatched_at", "started_at", "finished_at", "heartbeat_at", "worker_host", "child_pid",
        "device", "error", "result_pretty", "prompt_sample_summary",
    )  # fmt: skip
    exclude = ("result",)

    @admin.display(description="progress", ordering="progress")
    def progress_pct(self, job: Job) -> str:
        return f"{job.progress:.0%}"

    @admin.display(description="prompt sample")
    def prompt_sample_summary(self, job: Job) -> str:
        # Name, count and size only: the prompts themselves can be 16 MiB.
        sample = job.sample_info()
        if sample is None:
            return "—"
        return f"{sample} · {size(sample.size_bytes)} · sha256 {sample.sha256[:12]}"

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


@admin.register(Comment)
class CommentAdmin(admin.ModelAdmin):
    list_display = ("job", "author", "short_text", "created_at")
    search_fields = ("author", "text", "job__share_token", "job__model_name")
    date_hierarchy = "created_at"
    raw_id_fields = ("job",)

    @admin.display(description="text")
    def short_text(self, comment: Comment) -> str:
        return comment.text[:80]
