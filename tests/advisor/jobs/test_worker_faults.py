"""Faults on real workers: a killed child, a job over its limit, a lost worker."""

from __future__ import annotations

import os
import signal
from datetime import timedelta

import pytest
from django.utils import timezone

from advisor.jobs.models import Job, Worker
from advisor.jobs.reaper import reap
from tests.advisor.jobs.test_tasks import pid_gone, submit_demo
from tests.conftest import wait_for_job
from tests.gate import Gate

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
State = Job.State


def test_a_child_killed_mid_run_fails_the_job_and_the_worker_goes_on(
    worker_factory, demo_model_dir, tmp_path
):
    gate = Gate(tmp_path / "gate")  # mid-run until the kill, however fast the machine
    gated = worker_factory(["test-killed"], gate.env())
    try:
        job = wait_for_job(submit_demo(queue="test-killed").pk, until=gate.holds)
        os.kill(job.child_pid, signal.SIGKILL)  # what the kernel's OOM killer does
        job = wait_for_job(job.pk)
        assert job.state == State.FAILED
        assert job.error.startswith("killed by signal 9 (SIGKILL)"), job.error
        gate.open()
        following = wait_for_job(submit_demo(queue="test-killed").pk)
        assert following.state == State.SUCCEEDED, following.error
        assert following.worker_host == job.worker_host == gated.name
    finally:
        gated.stop()


def test_a_job_over_its_time_limit_is_killed_and_failed(worker_factory, demo_model_dir, tmp_path):
    gate = Gate(tmp_path / "gate")  # never opened: no machine finishes the job in time
    limited = worker_factory(["test-timeout"], {"ADVISOR_JOB_TIME_LIMIT_S": "2", **gate.env()})
    try:
        job = wait_for_job(submit_demo(queue="test-timeout").pk)
        assert job.state == State.FAILED
        assert job.error == "timed out after 2 s"
        assert job.child_pid is None and job.result is None
    finally:
        limited.stop()
    assert not Worker.objects.filter(name=limited.name).exists()  # withdrawn on shutdown


@pytest.mark.postgres
def test_a_lost_workers_job_is_requeued_and_finished_by_another(
    worker_factory, demo_model_dir, tmp_path
):
    gate = Gate(tmp_path / "gate")  # the first worker is lost mid-job, however fast
    first = worker_factory(["test-lost"], gate.env())
    job = wait_for_job(submit_demo(queue="test-lost").pk, until=gate.holds)
    first.kill()  # the whole worker at once, as a crashed machine would go
    assert pid_gone(job.child_pid), "the profiling child outlived its worker"
    later = timezone.now() + timedelta(minutes=10)  # a fake clock: the heartbeat is stale
    assert reap(now=later).requeued == 1
    requeued = Job.objects.get(pk=job.pk)
    assert requeued.state == State.QUEUED and requeued.dispatched_at is not None
    second = worker_factory(["test-lost"])
    try:
        job = wait_for_job(job.pk)
        assert job.state == State.SUCCEEDED, job.error
        assert job.attempts == 2 and job.worker_host == second.name
    finally:
        second.stop()
    assert not Worker.objects.filter(name=second.name).exists()  # withdrawn on shutdown
    # The killed worker could not withdraw: its row simply stops counting as live.
    assert not Worker.objects.live(now=later).filter(name=first.name).exists()
