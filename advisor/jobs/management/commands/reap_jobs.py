"""`manage.py reap_jobs`: one reaper pass (for cron, or by hand)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from advisor.jobs.reaper import reap


class Command(BaseCommand):
    help = "Re-queue or fail running jobs whose worker stopped beating; publish stuck queued jobs."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"reaper: {reap()}")
