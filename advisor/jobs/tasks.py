"""The Celery task: run one profiling job (the reaper is `advisor.jobs.reaper`).

`run_job` claims the row (one delivery wins), runs the profile in a fresh
child process (`advisor.jobs.child`) and maps its progress and outcome onto
the row. This process never imports torch: only the child does.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, close_old_connections

from advisor.jobs import child, gpus, profile_config
from advisor.jobs.models import Job
from profiling.config import ConfigError

log = logging.getLogger(__name__)
# A read or write of the row retried while the database is away: waits double from the
# first to the last, for as long as the attempt's lease can still be valid.
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 5.0
T = TypeVar("T")


class LeaseRanOut(Exception):
    """The database stayed away past the time this attempt's lease can be valid: the
    reaper gives the job to another attempt, so this one writes nothing more."""


class LeaseClock:
    """How long this attempt's lease can still be valid: the reaper gives the job away only
    once its heartbeat is `ADVISOR_HEARTBEAT_STALE_S` old, so the last beat that reached
    the database plus that limit (less two beats' margin) bounds every retry."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        # The claim wrote the first heartbeat (a delivery not claimed yet waits as long).
        self.last_beat = clock()

    def beat_written(self) -> None:
        self.last_beat = self.clock()

    def valid_until(self) -> float:
        margin = 2 * settings.ADVISOR_HEARTBEAT_S
        return self.last_beat + max(0.0, settings.ADVISOR_HEARTBEAT_STALE_S - margin)


@shared_task(bind=True, acks_late=True, ignore_result=True, name="advisor.jobs.tasks.run_job")
def run_job(self: Any, job_id: int) -> str:
    """Run job `job_id` if it is still QUEUED; returns what happened (for logs).

    Every read and write of the row waits through a database outage for as long as the
    lease can be valid (`LeaseClock`): an outage shorter than that costs a pause, and
    neither the profile nor the job.
    """
    host = self.request.hostname or "worker"
    try:
        # A delivery that meets an outage holds its message and waits as long as an
        # attempt would; dropped, the message would wait for the reaper to publish it again.
        lease = retried(lambda: Job.objects.claim(job_id, host), LeaseClock(),
                        f"job {job_id}: the claim")  # fmt: skip
    except LeaseRanOut:
        return "not claimed"  # still QUEUED: the reaper publishes it again
    if not lease:
        log.info("job %s: not queued any more (duplicate delivery or cancelled); skipped", job_id)
        return "skipped"
    clock = LeaseClock()
    try:
        job = retried(lambda: Job.objects.get(pk=job_id), clock, f"job {job_id}: its row")
        log.info("job %s: claimed, attempt %s, %s", job_id, job.attempts, job.model_name)
        outcome = _run_child(job, lease, clock)
    except LeaseRanOut:
        return "lost"  # the reaper runs the job again, as for a worker that died
    except SoftTimeLimitExceeded:  # the backstop when the job's own deadline did not fire
        outcome = child.Outcome.failed(f"timed out after {settings.CELERY_TASK_SOFT_TIME_LIMIT} s")
    except ConfigError as exc:
        outcome = child.Outcome.failed(f"bad config: {exc}")
    except gpus.NoDevices as exc:
        outcome = child.Outcome.failed(str(exc))
    except Exception as exc:  # the row must not stay RUNNING until the reaper
        log.exception("job %s: the worker failed to run it", job_id)
        outcome = child.Outcome.failed(f"internal error in the worker: {exc}")
    record(job_id, lease, outcome, clock)
    return outcome.status


def _run_child(job: Job, lease: str, clock: LeaseClock | None = None) -> child.Outcome:
    clock = clock or LeaseClock()
    # The config reads the row's uploads (a prompt sample, conversations) from the database.
    config = retried(lambda: profile_config.config_for(job), clock, f"job {job.pk}: its config")
    devices = gpus.declared(settings.ADVISOR_WORKER_GPUS)
    with (
        gpus.lease(
            devices,
            gpus.needed(config, len(devices)),
            settings.VAR_DIR / "gpus",
            on_wait=lambda message: _beat(job.pk, lease, None, message, clock),
            timeout_s=settings.ADVISOR_JOB_TIME_LIMIT_S,
        ) as held,
        tempfile.TemporaryDirectory(prefix=f"advisor-job-{job.pk}-") as workdir,
    ):
        how = child.Run(
            workdir=Path(workdir),
            time_limit_s=settings.ADVISOR_JOB_TIME_LIMIT_S,
            tick_s=settings.ADVISOR_HEARTBEAT_S,
            watch=lambda progress: _beat(job.pk, lease, progress, clock=clock),
            on_start=lambda pid: _beat(job.pk, lease, None, "profiling", clock, child_pid=pid),
            env={**child_env(), **gpus.visible(held)},
        )
        return child.run(config.to_dict(), how)


def child_env() -> dict[str, str]:
    """What the child needs besides the worker's own environment."""
    path = os.pathsep.join(p for p in (str(settings.BASE_DIR), os.environ.get("PYTHONPATH")) if p)
    return {"ADVISOR_DEMO_DIR": str(settings.ADVISOR_DEMO_DIR), "PYTHONPATH": path}


def _beat(
    job_id: int,
    lease: str,
    progress: child.Progress | None,
    message: str = "",
    clock: LeaseClock | None = None,
    **extra: Any,
) -> bool:
    fields = {**extra, "message": message} if message else dict(extra)
    if progress is not None:
        fields.update(progress=progress.fraction, phase=progress.phase, message=progress.message)
    try:
        held = Job.objects.beat(job_id, lease, **fields)
    except DatabaseError as exc:
        # One lost beat must not kill a long profile; the reaper judges real silence.
        log.warning("job %s: heartbeat not written: %s", job_id, exc)
        close_old_connections()  # the next beat opens a fresh connection
        return True
    if held and clock is not None:
        clock.beat_written()
    return held


def record(
    job_id: int, lease: str, outcome: child.Outcome, clock: LeaseClock | None = None
) -> None:
    """Write the outcome, unless a cancel or the reaper already decided the row.

    An attempt that lost its lease (the reaper gave the job to another) writes nothing.
    A database that is away when the outcome is ready does not cost the profile: the
    write is retried with backoff for as long as the lease can still be valid (`clock`);
    only then is the outcome dropped, and the reaper runs the job again, as it would for
    a worker that died.
    """
    if outcome.status == child.Outcome.SUCCEEDED:
        fields: dict[str, Any] = {
            "progress": 1.0, "message": "done", "result": outcome.result,
            "device": device_of(outcome.result),
        }  # fmt: skip
        state = Job.State.SUCCEEDED
    elif outcome.status == child.Outcome.STOPPED:
        state, fields = Job.State.CANCELLED, {"message": "cancelled"}
    else:
        state, fields = Job.State.FAILED, {"error": outcome.error, "message": outcome.error[:512]}
    clock = clock or LeaseClock()
    try:
        written = retried(
            lambda: Job.objects.finish(job_id, lease, state, **fields), clock,
            f"job {job_id}: the outcome",
        )  # fmt: skip
    except LeaseRanOut:
        written = False
    log.info(
        "job %s: %s%s",
        job_id,
        outcome.status,
        "" if written else " (not written: the row is no longer this attempt's)",
    )


def retried(
    call: Callable[[], T],
    clock: LeaseClock,
    what: str = "a database call",
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`call()` again after each DatabaseError, the waits doubling from RETRY_FIRST_S to
    RETRY_MAX_S, until it answers; LeaseRanOut once the lease can no longer be valid."""
    wait = RETRY_FIRST_S
    while True:
        try:
            return call()
        except DatabaseError as exc:
            close_old_connections()  # a connection the outage broke is opened afresh
            left = clock.valid_until() - clock.clock()
            if left <= 0:
                log.error("%s: the database stayed away past the lease (%s); the reaper "
                          "will run the job again", what, exc)  # fmt: skip
                raise LeaseRanOut(what) from exc
            log.warning("%s not read or written yet (%s): again in %.1f s", what, exc,
                        min(wait, left))  # fmt: skip
            sleep(min(wait, left))
            wait = min(2 * wait, RETRY_MAX_S)


def device_of(result: dict[str, Any] | None) -> str:
    """'cuda:0 (NVIDIA H100 80GB HBM3)' from a result's environment."""
    env = (result or {}).get("environment") or {}
    device, name = env.get("device") or "", env.get("device_name") or ""
    return (f"{device} ({name})" if name and name != device else device)[:255]
