"""From a job row to a Celery message: queues, submit, cancel, reap on demand.

The row is saved QUEUED first and the message, carrying only the id, is
published after the transaction commits, so a worker never looks for a row
it cannot see yet. A broker that is down fails the submit within about a
second, and the row is deleted: no job waits forever for a message.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import KombuError, OperationalError

from advisor import embedded_redis
from advisor.celery import app
from advisor.jobs.models import Job, Worker
from profiling.measure import hardware

log = logging.getLogger(__name__)

QUEUE_DEFAULT = "default"  # any worker
QUEUE_CPU = "cpu"
GPU_QUEUE_PREFIX = "gpu-"
# The task by name: this module is below the task module, which imports it.
RUN_JOB = "advisor.jobs.tasks.run_job"
# Task ids name their job, so the reaper can tell which jobs the broker still holds.
TASK_ID_PREFIX = "advisor-job-"
_TASK_ID = re.compile(rb'"(?:id|correlation_id)":\s*"' + TASK_ID_PREFIX.encode() + rb"(\d+)-")


class QueueUnavailable(RuntimeError):
    """The broker cannot take the job now; nothing was left queued."""


def gpu_queue(gpu_kind: str) -> str:
    """`H100` → `gpu-h100-sxm`: one queue per catalog entry, aliases folded in."""
    return GPU_QUEUE_PREFIX + hardware.lookup(gpu_kind).key.lower()


def queue_for(job: Job) -> str:
    """The queue of the job's target GPU kind, or `default` (any worker)."""
    return gpu_queue(job.gpu_kind) if job.gpu_kind else QUEUE_DEFAULT


def available_queues() -> dict[str, list[Worker]]:
    """Queues that live workers consume now → those workers (for the form)."""
    served: dict[str, list[Worker]] = {}
    for worker in Worker.objects.live():
        for name in worker.queue_list:
            served.setdefault(name, []).append(worker)
    return dict(sorted(served.items(), key=lambda item: _queue_order(item[0])))


def _queue_order(name: str) -> tuple[int, str]:
    rank = {QUEUE_DEFAULT: 0, QUEUE_CPU: 2}.get(name, 1)
    return rank, name


def submit(job: Job | None = None, /, **fields: Any) -> Job:
    """Save a job QUEUED and enqueue it once committed; raises QueueUnavailable.

    `submit(job)` keeps `job.queue` as set (the form picks it); `submit(**fields)`
    builds the row and takes `queue_for` unless `queue` is given. Called inside
    an atomic block, the publish (and the error) happens when that block commits.
    """
    if job is None:
        job = Job(**fields)
        if "queue" not in fields:
            job.queue = queue_for(job)
    job.state, job.dispatched_at = Job.State.QUEUED, None
    job.save()
    transaction.on_commit(lambda: _publish_new(job))
    return job


def _publish_new(job: Job) -> None:
    try:
        enqueue(job)
    except QueueUnavailable:
        job.delete()  # the user still has the form; a row would only mislead
        raise


def enqueue(job: Job) -> None:
    """Publish `run_job(job.pk)` on `job.queue` and stamp `dispatched_at`."""
    try:
        ensure_broker()
        # A fresh connection per publish: it follows the configured broker
        # URL and fails fast, instead of a pooled one that retries for long.
        with app.connection_for_write() as conn:
            app.send_task(
                RUN_JOB,
                (job.pk,),
                task_id=f"{TASK_ID_PREFIX}{job.pk}-{uuid.uuid4().hex[:12]}",
                queue=job.queue,
                connection=conn,
                retry=True,
                retry_policy=app.conf.task_publish_retry_policy,
            )
    except (OperationalError, KombuError, OSError, embedded_redis.EmbeddedRedisError) as exc:
        log.warning("job %s: could not publish to %s: %s", job.pk, job.queue, exc)
        raise QueueUnavailable(f"the job queue (Redis) is unreachable: {exc}") from exc
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(dispatched_at=now)
    job.dispatched_at = now


def jobs_in_broker(queues: Iterable[str]) -> set[int] | None:
    """Ids of jobs with a message waiting in `queues` or delivered and not yet acked.

    Read straight from Redis (kombu's lists and its `unacked` hash); None when
    the broker cannot be read now or is not Redis, so nothing is judged lost.
    """
    try:
        ensure_broker()
        with app.connection_for_read() as conn:
            channel = conn.default_channel
            if not hasattr(channel, "unacked_key"):
                return None
            pipe = channel.client.pipeline()
            for queue in queues:
                for priority in channel.priority_steps:
                    pipe.lrange(channel._q_for_pri(queue, priority), 0, -1)
            pipe.hvals(channel.unacked_key)
            replies = pipe.execute()
    except Exception as exc:  # kombu's, redis-py's or the socket's: unknown this pass
        log.warning("could not read the broker's queues: %s", exc)
        return None
    held: set[int] = set()
    for reply in replies:
        for raw in reply:
            held.update(int(pk) for pk in _TASK_ID.findall(raw))
    return held


def ensure_broker() -> None:
    """Bring the embedded Redis up when this site uses it (a no-op with a Redis server)."""
    if settings.ADVISOR_EMBEDDED_REDIS:
        embedded_redis.ensure(settings.ADVISOR_EMBEDDED_REDIS)


def cancel(job: Job) -> bool:
    """Cancel a queued job now, or ask a running one's worker to stop it.

    Returns whether anything changed; `job` is refreshed from the row.
    """
    changed = Job.objects.cancel(job.pk)
    job.refresh_from_db()
    return changed
