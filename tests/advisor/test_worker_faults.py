"""Faults on real workers: a killed child, a job over its limit, a lost worker."""

from __future__ import annotations

import os
import signal
from datetime import timedelta

import pytest
from django.utils import timezone

from advisor.jobs.models import Job, Worker
from advisor.jobs.reaper import reap
from tests.advisor.test_tasks import pid_gone, running_with_progress, submit_demo
from tests.conftest import wait_for_job

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
State = Job.State


def test_a_child_killed_mid_run_fails_the_job_and_the_worker_goes_on(worker, demo_model_dir):
    job = wait_for_job(submit_demo(quick=False).pk, until=running_with_progress)
    os.kill(job.child_pid, signal.SIGKILL)  # what the kernel's OOM killer does
    job = wait_for_job(job.pk, timeout_s=10)
    assert job.state == State.FAILED
    assert job.error.startswith("killed by signal 9 (SIGKILL)"), job.error
    following = wait_for_job(submit_demo().pk)
    assert following.state == State.SUCCEEDED, following.error
    assert following.worker_host == job.worker_host


def test_a_job_over_its_time_limit_is_killed_and_failed(worker_factory, demo_model_dir):
    limited = worker_factory(["test-timeout"], {"ADVISOR_JOB_TIME_LIMIT_S": "2"})
    try:
        job = wait_for_job(submit_demo(quick=False, queue="test-timeout").pk, timeout_s=60)
        assert job.state == State.FAILED
        assert job.error == "timed out after 2 s"
        assert job.finished_at - job.started_at < timedelta(seconds=10)
    finally:
        limited.stop()
    assert not Worker.objects.filter(name=limited.name).exists()  # withdrawn on shutdown


def test_a_lost_workers_job_is_requeued_and_finished_by_another(worker_factory, demo_model_dir):
    first = worker_factory(["test-lost"])
    job = wait_for_job(submit_demo(quick=False, queue="test-lost").pk, until=running_with_progress)
    first.kill()  # the whole worker at once, as a crashed machine would go
    assert pid_gone(job.child_pid), "the profiling child outlived its worker"
    Job.objects.filter(pk=job.pk).update(quick=True)  # the retry need not be long
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
