"""The reaper: recover jobs whose worker was lost and queued jobs whose message was.

Runs from every worker's announcer thread and from the site's pages
(`reap_if_due`), once per ADVISOR_REAP_EVERY_S fleet-wide, and on demand with
`manage.py reap_jobs`. Every change is a conditional update, so two reapers
racing, or a worker that beats meanwhile, never undo each other.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from advisor.jobs import dispatch
from advisor.jobs.models import Job

log = logging.getLogger(__name__)

# Queued rows this old with no message are published again.
UNDISPATCHED_AFTER = timedelta(minutes=1)
REAP_THROTTLE_KEY = "advisor:jobs:reaped-recently"


@dataclass
class Reaped:
    requeued: int = 0
    failed: int = 0  # or cancelled, when the user had asked
    redispatched: int = 0  # never published, or published and lost by the broker

    def __str__(self) -> str:
        return f"{self.requeued} re-queued, {self.failed} ended, {self.redispatched} re-dispatched"


def reap(now: datetime | None = None) -> Reaped:
    """Recover jobs whose worker went silent, and queued jobs never published."""
    now = now or timezone.now()
    report = Reaped()
    for job in Job.objects.stale(now=now).listed():
        if job.cancel_requested:  # the user's cancel stands: no retry
            report.failed += _end_lost(
                job, now, Job.State.CANCELLED, "cancelled; its worker was lost"
            )
        elif job.attempts < settings.ADVISOR_MAX_ATTEMPTS:
            report.requeued += _requeue(job, now)
        else:
            silent_s = int((now - job.heartbeat_at).total_seconds())
            error = f"worker lost (no heartbeat for {silent_s} s) after {job.attempts} attempts"
            report.failed += _end_lost(job, now, Job.State.FAILED, error)
    for job in Job.objects.undispatched(now=now, after=UNDISPATCHED_AFTER).listed():
        report.redispatched += _redispatch(job)
    for job in lost_messages(now):
        report.redispatched += _redispatch(job)
    if report.requeued or report.failed or report.redispatched:
        log.info("reaper: %s", report)
    return report


def _requeue(job: Job, now: datetime) -> int:
    # Matching the heartbeat we judged stale: a worker that beats meanwhile keeps its job.
    lost = Job.objects.filter(pk=job.pk, state=Job.State.RUNNING, heartbeat_at=job.heartbeat_at)
    message = (
        f"worker lost; retrying (attempt {job.attempts + 1} of {settings.ADVISOR_MAX_ATTEMPTS})"
    )
    if not lost.update(
        state=Job.State.QUEUED,
        lease="",  # the lost attempt's writes match nothing from here on
        dispatched_at=None,
        child_pid=None,
        worker_host="",
        message=message,
    ):
        return 0
    job.refresh_from_db()
    _redispatch(job)
    return 1


def _end_lost(job: Job, now: datetime, state: str, error: str) -> int:
    lost = Job.objects.filter(pk=job.pk, state=Job.State.RUNNING, heartbeat_at=job.heartbeat_at)
    return lost.update(
        state=state, lease="", finished_at=now, child_pid=None, error=error, message=error
    )


def lost_messages(now: datetime) -> list[Job]:
    """Queued jobs published a while ago whose message the broker no longer holds.

    A Redis without persistence forgets every message when it restarts. Such a
    job would wait forever; publishing it again is safe, as a duplicate
    delivery finds the row claimed and skips. Unknown (broker unreachable):
    nothing is judged lost this pass.
    """
    grace = timedelta(seconds=settings.ADVISOR_REDISPATCH_GRACE_S)
    candidates = list(Job.objects.published_before(now - grace).only("pk", "queue"))
    if not candidates:
        return []
    held = dispatch.jobs_in_broker({job.queue for job in candidates})
    if held is None:
        return []
    return [job for job in candidates if job.pk not in held]


def _redispatch(job: Job) -> int:
    try:
        dispatch.enqueue(job)
    except dispatch.QueueUnavailable:
        return 0  # still undispatched: the next pass tries again
    return 1


def reap_if_due() -> bool:
    """Run the reaper if no process did in the last ADVISOR_REAP_EVERY_S; cheap otherwise.

    Workers call this from their announcer thread and pages on each view, so
    recovery never waits behind queued jobs and needs no beat process. The
    throttle is a key in the shared cache: one reap per period fleet-wide.
    """
    try:
        if not cache.add(REAP_THROTTLE_KEY, True, timeout=settings.ADVISOR_REAP_EVERY_S):
            return False
    except Exception as exc:  # the cache's Redis is down: the next call tries again
        log.warning("reaper skipped: the shared cache is unreachable: %s", exc)
        return False
    try:
        reap()
    except Exception:  # a page must render, and a worker live on, even if the reaper cannot
        log.exception("on-demand reap failed")
    return True
