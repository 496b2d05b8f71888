"""Job transitions: each is one conditional update, so racing writers cannot both win."""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.utils import timezone

from advisor.jobs import dispatch
from advisor.jobs.models import Job
from advisor.jobs.reaper import REAP_THROTTLE_KEY, reap, reap_if_due
from advisor.jobs.tasks import run_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]
State = Job.State


def make_job(**fields) -> Job:
    defaults = {"model_source": Job.ModelSource.DEMO, "model_name": "demo", "queue": "cpu"}
    return Job.objects.create(**{**defaults, **fields})


LEASE = "lease-of-attempt"


# A fake clock for the reaper: the jobs it must recover are stale only at this time, so a
# live worker left from an earlier test, whose own reaper runs on the real clock against
# the same database, cannot take them first.
LATER = timedelta(seconds=200)


def running_job(beat_age_s: float = 0, attempts: int = 1, **fields) -> Job:
    beat = timezone.now() - timedelta(seconds=beat_age_s)
    fields.setdefault("lease", LEASE)
    return make_job(
        state=State.RUNNING, attempts=attempts, heartbeat_at=beat, started_at=beat, **fields
    )


def state_of(job: Job) -> str:
    job.refresh_from_db()
    return job.state


def test_only_one_claim_wins():
    job = make_job()
    lease = Job.objects.claim(job.pk, "w1@host")
    assert lease
    assert Job.objects.claim(job.pk, "w2@host") == ""
    job.refresh_from_db()
    assert (job.state, job.attempts, job.worker_host) == (State.RUNNING, 1, "w1@host")
    assert job.heartbeat_at is not None and job.lease == lease


# Two processes, each with its own connection, claim one job at the same moment.
CLAIM_AT_ONCE = """
import os, sys, time
from pathlib import Path
import django
django.setup()
from advisor.jobs.models import Job
folder, pk, name = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
Job.objects.filter(pk=pk).exists()  # connected before the barrier
(folder / f"ready-{name}").touch()
while not (folder / "go").exists():
    time.sleep(0.001)
print(repr(Job.objects.claim(pk, name)))
"""


def test_of_two_processes_claiming_one_job_at_once_exactly_one_wins(redis_url, tmp_path):
    from tests.conftest import worker_env

    job = make_job()
    env = {**worker_env(redis_url), "DJANGO_SETTINGS_MODULE": "advisor.settings"}
    names = ("w1@host", "w2@host")
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIM_AT_ONCE, str(tmp_path), str(job.pk), name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for name in names
    ]
    deadline = time.monotonic() + 600  # a backstop: two Django start-ups on a busy machine
    while not all((tmp_path / f"ready-{n}").exists() for n in names):
        assert all(c.poll() is None for c in children), [c.communicate() for c in children]
        assert time.monotonic() < deadline, "the claimants never reached the barrier"
        time.sleep(0.01)
    (tmp_path / "go").touch()
    outputs = [c.communicate(timeout=600) for c in children]
    assert all(c.returncode == 0 for c in children), outputs
    leases = [ast.literal_eval(out.strip().splitlines()[-1]) for out, _ in outputs]
    winners = [name for name, lease in zip(names, leases, strict=True) if lease]
    assert len(winners) == 1, leases
    job.refresh_from_db()
    assert (job.state, job.attempts, job.worker_host) == (State.RUNNING, 1, winners[0])
    assert job.lease == next(lease for lease in leases if lease)


def test_an_attempt_that_lost_its_lease_writes_nothing(redis_url, settings):
    settings.ADVISOR_HEARTBEAT_STALE_S = 120
    job = make_job(queue="gpu-b200")  # a queue no live worker of an earlier test consumes
    first = Job.objects.claim(job.pk, "frozen@host")
    # The frozen attempt's job goes back to the queue (at a fake time: see LATER).
    assert reap(now=timezone.now() + LATER).requeued == 1
    second = Job.objects.claim(job.pk, "other@host")
    assert second and second != first
    # The frozen attempt wakes up: its beat, its progress, its result are all refused.
    assert not Job.objects.beat(job.pk, first, progress=0.9, child_pid=4242)
    assert not Job.objects.finish(job.pk, first, State.SUCCEEDED, result={"stale": True})
    assert not Job.objects.finish(job.pk, first, State.FAILED, error="stale")
    assert Job.objects.finish(job.pk, second, State.SUCCEEDED, result={"fresh": True})
    job.refresh_from_db()
    assert (job.state, job.result, job.attempts) == (State.SUCCEEDED, {"fresh": True}, 2)
    assert job.child_pid is None and job.worker_host == "other@host"


def test_the_reaper_republishes_a_queued_job_whose_message_the_broker_lost(redis_url):
    # The broker's unacked set is every queue's: a live worker of an earlier test may
    # hold another job's message there, so the test asks about its own job only.
    job = make_job(queue="test-lost-message")
    dispatch.enqueue(job)
    assert job.pk in dispatch.jobs_in_broker(["test-lost-message"])
    reap(now=timezone.now() + timedelta(minutes=5))  # held by the broker: left alone
    assert job.pk in dispatch.jobs_in_broker(["test-lost-message"])
    _purge("test-lost-message")  # what a restart of a Redis without persistence does
    assert job.pk not in dispatch.jobs_in_broker(["test-lost-message"])
    assert reap(now=timezone.now() + timedelta(minutes=5)).redispatched == 1
    assert job.pk in dispatch.jobs_in_broker(["test-lost-message"])
    assert state_of(job) == State.QUEUED
    _purge("test-lost-message")


def test_a_fresh_publish_is_not_judged_lost(redis_url):
    job = make_job(queue="test-lost-message")
    dispatch.enqueue(job)
    _purge("test-lost-message")
    assert reap().redispatched == 0  # within the grace: it may be on its way to a worker
    job.refresh_from_db()
    assert job.state == State.QUEUED


def _purge(queue: str) -> None:
    from advisor.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)


def test_a_cancelled_job_cannot_be_claimed():
    job = make_job(state=State.CANCELLED)
    assert not Job.objects.claim(job.pk, "w@host")
    assert state_of(job) == State.CANCELLED


def test_a_duplicate_delivery_runs_nothing():
    job = running_job(attempts=1)
    assert run_job.apply((job.pk,)).get() == "skipped"
    job.refresh_from_db()
    assert (job.state, job.attempts, job.child_pid) == (State.RUNNING, 1, None)


def test_cancelling_a_queued_job_ends_it_at_once():
    job = make_job()
    assert dispatch.cancel(job)
    assert job.state == State.CANCELLED and job.finished_at is not None
    assert not dispatch.cancel(job)  # final: nothing changes


def test_cancelling_a_running_job_asks_its_task_to_stop():
    job = running_job()
    assert dispatch.cancel(job)
    assert job.state == State.RUNNING and job.cancel_requested
    assert not Job.objects.beat(job.pk, LEASE)  # the task's next beat learns it must stop
    assert Job.objects.finish(job.pk, LEASE, State.CANCELLED)
    assert state_of(job) == State.CANCELLED


def test_a_stop_without_a_cancel_request_is_not_recorded_as_cancelled():
    job = running_job()
    assert not Job.objects.finish(job.pk, LEASE, State.CANCELLED)
    assert state_of(job) == State.RUNNING


def test_a_late_outcome_never_overwrites_a_final_state():
    job = running_job()
    Job.objects.filter(pk=job.pk).update(state=State.CANCELLED)
    assert not Job.objects.finish(job.pk, LEASE, State.SUCCEEDED, result={"x": 1})
    job.refresh_from_db()
    assert job.state == State.CANCELLED and job.result is None


def test_progress_beats_only_while_running():
    job = running_job(beat_age_s=30)
    assert Job.objects.beat(job.pk, LEASE, progress=0.5, phase="decode", message="step 3")
    job.refresh_from_db()
    assert (job.progress, job.phase) == (0.5, "decode")
    assert timezone.now() - job.heartbeat_at < timedelta(seconds=5)
    Job.objects.filter(pk=job.pk).update(state=State.QUEUED)  # the reaper took it back
    assert not Job.objects.beat(job.pk, LEASE)


def test_the_reaper_requeues_a_lost_job_and_publishes_it(redis_url, settings):
    settings.ADVISOR_HEARTBEAT_STALE_S = 120
    job = running_job(beat_age_s=10, attempts=1, queue="gpu-b200")
    later = timezone.now() + timedelta(seconds=200)  # a fake clock: no sleeping
    report = reap(now=later)
    job.refresh_from_db()
    assert (report.requeued, report.failed) == (1, 0)
    assert job.state == State.QUEUED and job.dispatched_at is not None
    assert job.message == "worker lost; retrying (attempt 2 of 3)"
    assert job.lease == ""  # the lost attempt holds nothing any more


def test_the_reaper_fails_a_job_lost_too_often(settings):
    settings.ADVISOR_MAX_ATTEMPTS, settings.ADVISOR_HEARTBEAT_STALE_S = 3, 120
    job = running_job(beat_age_s=100, attempts=3)
    report = reap(now=timezone.now() + LATER)
    job.refresh_from_db()
    assert report.failed == 1 and job.state == State.FAILED
    assert job.error.startswith("worker lost (no heartbeat for 3")
    assert job.error.endswith("s) after 3 attempts")


def test_a_lost_job_the_user_cancelled_is_not_retried(settings):
    settings.ADVISOR_HEARTBEAT_STALE_S = 120
    job = running_job(attempts=1, cancel_requested=True)
    assert reap(now=timezone.now() + LATER).failed == 1
    job.refresh_from_db()
    assert job.state == State.CANCELLED and job.attempts == 1


def test_the_reaper_leaves_beating_jobs_alone():
    job = running_job(beat_age_s=5)
    assert reap().requeued == 0
    assert state_of(job) == State.RUNNING


def test_the_reaper_publishes_queued_jobs_that_never_were(redis_url):
    later = timezone.now() + LATER
    old = make_job(queue="gpu-b200")
    new = make_job(created_at=later, queue="gpu-b200")
    assert reap(now=later).redispatched == 1
    old.refresh_from_db()
    new.refresh_from_db()
    assert old.dispatched_at is not None and new.dispatched_at is None


def test_pages_reap_at_most_once_per_interval():
    cache.delete(REAP_THROTTLE_KEY)
    job = running_job(beat_age_s=10_000, attempts=99)
    assert reap_if_due()
    assert state_of(job) == State.FAILED
    assert not reap_if_due()


def test_the_reap_jobs_command_runs_one_pass(settings):
    # Stale to this process alone (a live worker of an earlier test reaps on the default
    # 120 s): 30 s of silence is too long here only.
    settings.ADVISOR_HEARTBEAT_STALE_S = 20
    job = running_job(beat_age_s=30, attempts=99)
    out = io.StringIO()
    call_command("reap_jobs", stdout=out)
    assert "0 re-queued, 1 ended" in out.getvalue()
    assert state_of(job) == State.FAILED
