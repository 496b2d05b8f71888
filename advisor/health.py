"""`GET /health`: can this site process do its work right now?

It checks what a job needs: the database answers, the broker (Redis) answers,
the shared cache answers, and how many workers announced themselves recently.
200 when the database, broker and cache are up (no live worker is reported,
not failed: jobs wait in their queue); 503 with Retry-After otherwise, as every
page answers while the database is away. For a load balancer or an
orchestrator's probe; it reads nothing a share link protects.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from advisor.celery import app
from advisor.jobs import dispatch
from advisor.outage import RETRY_AFTER_S


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _broker() -> None:
    dispatch.ensure_broker()
    with app.connection_for_read() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)


def _cache() -> None:
    cache.set("advisor:health", 1, 10)
    if cache.get("advisor:health") != 1:
        raise RuntimeError("the cache did not give back what it was given")


def check(probe: Callable[[], None]) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        probe()
    except Exception as exc:  # the probe's whole point is to report any failure
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ok": True, "ms": round(1e3 * (time.perf_counter() - start), 1)}


@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    from advisor.jobs.models import Worker

    checks = {"database": check(_database), "broker": check(_broker), "cache": check(_cache)}
    ok = all(item["ok"] for item in checks.values())
    workers = None
    if checks["database"]["ok"]:
        workers = [
            {"name": w.name, "queues": w.queue_list} for w in Worker.objects.live().order_by("name")
        ]
    body = {"ok": ok, "checks": checks, "workers": workers}
    response = JsonResponse(body, status=200 if ok else 503)
    if not ok:
        response["Retry-After"] = str(RETRY_AFTER_S)
    return response
