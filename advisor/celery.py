"""The Celery app (the official Django layout): settings under CELERY_*."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "advisor.settings")

app = Celery("advisor")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.celeryd_init.connect
@signals.beat_init.connect
def _start_embedded_redis(**_: Any) -> None:
    """A worker or beat with no broker configured brings the embedded Redis up."""
    from django.conf import settings

    from advisor import embedded_redis

    if settings.ADVISOR_EMBEDDED_REDIS:
        embedded_redis.ensure(settings.ADVISOR_EMBEDDED_REDIS)
