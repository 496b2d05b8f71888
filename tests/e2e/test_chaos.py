"""Faults on the whole pipe, with real Redis and real worker processes.

- the broker (a Redis without persistence) restarts twice during a batch:
  every job still ends, none is lost, none has its result written twice;
- a worker frozen (SIGSTOP) past the stale limit: another takes its job, and
  when it wakes its writes are refused and its child is killed.

Each test prints one `chaos …` line of counts; `python bench/chaos.py` runs
this module and collects them.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import signal
import sqlite3
import time

import pytest
from django.conf import settings
from django.db import connection

from advisor import embedded_redis
from advisor.jobs import dispatch
from advisor.jobs.models import Job
from advisor.settings import cache_location
from tests.advisor.jobs.test_tasks import pid_gone
from tests.conftest import JOB_TIMEOUT_S, WorkerProcess, wait_for_job
from tests.gate import Gate

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
State = Job.State
# Quick demo jobs with a small workload: a few seconds each on two cores.
TINY = {"prompt_tokens": 32, "output_tokens": 8, "concurrency": 2}
# Eight in the suite (two restarts, each with half the batch or more still queued);
# `python bench/chaos.py --jobs 24` counts larger batches.
BATCH = int(os.environ.get("ADVISOR_CHAOS_JOBS", "8"))
# Fast recovery, so a test takes seconds of waiting rather than minutes.
CHAOS_ENV = {
    "ADVISOR_REAP_EVERY_S": "1",
    "ADVISOR_REDISPATCH_GRACE_S": "3",
    "ADVISOR_HEARTBEAT_STALE_S": "8",
}


def chaos_env(redis_url: str) -> dict[str, str]:
    """CHAOS_ENV, with a cache database of these workers' own.

    The reaper runs once per period across every process sharing the cache,
    with the settings of whichever process takes the turn. The session's own
    test worker reaps with the defaults (every 30 s, stale after 120 s), so it
    must not share the turn with workers whose limits are seconds.
    """
    shared = cache_location(redis_url)
    assert shared is not None and shared.endswith("1")
    return {**CHAOS_ENV, "ADVISOR_CACHE_URL": shared[:-1] + "2"}


WRITTEN = re.compile(r"job (\d+): (succeeded|failed|stopped)$", re.MULTILINE)


def submit(queue: str, **fields) -> Job:
    values = {"model_source": "demo", "model_name": "demo", "quick": True, **TINY, **fields}
    return dispatch.submit(queue=queue, **values)


def outcomes_written(*workers: WorkerProcess) -> collections.Counter[int]:
    """How many final states each job had written, read from the workers' own logs."""
    counts: collections.Counter[int] = collections.Counter()
    for worker in workers:
        counts.update(int(pk) for pk, _ in WRITTEN.findall(worker.log_path.read_text()))
    return counts


def restart_broker() -> None:
    socket = settings.ADVISOR_EMBEDDED_REDIS
    embedded_redis.stop(socket)
    time.sleep(1.0)  # an outage, not a blink
    embedded_redis.ensure(socket)


@pytest.mark.skipif(
    not settings.ADVISOR_EMBEDDED_REDIS, reason="restarts the embedded Redis of this session"
)
def test_a_broker_restarted_twice_during_a_batch_loses_no_job(
    worker_factory, demo_model_dir, redis_url
):
    worker = worker_factory(["test-chaos"], chaos_env(redis_url))
    try:
        jobs = [submit("test-chaos") for _ in range(BATCH)]
        ids = [job.pk for job in jobs]
        for share in (0.25, 0.5):  # twice, each time with most of the batch still queued
            deadline = time.monotonic() + 30 * BATCH
            while time.monotonic() < deadline:
                done = Job.objects.filter(pk__in=ids, state=State.SUCCEEDED).count()
                if done >= int(BATCH * share):
                    break
                time.sleep(0.2)
            restart_broker()
        finals = [wait_for_job(job.pk, timeout_s=JOB_TIMEOUT_S + 30 * BATCH) for job in jobs]
    finally:
        worker.stop()
    written = outcomes_written(worker)
    states = collections.Counter(job.state for job in finals)
    duplicates = sum(n - 1 for n in written.values() if n > 1)
    lost = sum(1 for job in finals if not job.is_final)
    attempts = sum(job.attempts for job in finals)
    print(
        f"chaos broker-restart: jobs={BATCH} restarts=2 succeeded={states[State.SUCCEEDED]} "
        f"failed={states[State.FAILED]} lost={lost} duplicates={duplicates} attempts={attempts}"
    )
    assert states[State.SUCCEEDED] == BATCH, [(j.pk, j.state, j.error) for j in finals]
    assert duplicates == 0, written
    assert all(written[job.pk] == 1 for job in finals), written


@pytest.mark.postgres
def database_writable() -> bool:
    """Whether another process may write the test database now (SQLite: nobody holds its
    write lock; any other database locks rows, not the whole file)."""
    if connection.vendor != "sqlite":
        return True
    probe = sqlite3.connect(connection.settings_dict["NAME"], timeout=0.2)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.rollback()
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()


def freeze_holding_no_lock(groups: list[int], tries: int = 100) -> None:
    """SIGSTOP the process groups at a moment none of them holds the database's write lock.

    On SQLite a process frozen inside a write (a lease beat's transaction) locks every
    other process out of the whole file until it wakes: not the frozen host this test is
    about, whose job another worker takes. Frozen mid-write, they are woken and frozen
    again a moment later.
    """
    for _ in range(tries):
        for group in groups:
            os.killpg(group, signal.SIGSTOP)
        if database_writable():
            return
        for group in groups:
            os.killpg(group, signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError(f"the workers held the database's write lock at {tries} tries")


def test_a_frozen_workers_stale_attempt_writes_nothing(
    worker_factory, demo_model_dir, redis_url, tmp_path
):
    # Both attempts stop at the gate: the first is frozen mid-job and the second still
    # runs when the first wakes, however fast the machine.
    gate = Gate(tmp_path / "gate")
    env = {**chaos_env(redis_url), **gate.env()}
    frozen = worker_factory(["test-frozen"], env)
    job = wait_for_job(submit("test-frozen").pk, until=gate.holds)
    stale_child, first_lease = job.child_pid, job.lease
    groups = [frozen.proc.pid, os.getpgid(stale_child)]
    rescuer = None
    try:
        freeze_holding_no_lock(groups)
        rescuer = worker_factory(["test-frozen"], env)
        taken = wait_for_job(job.pk, until=lambda j: j.attempts == 2 and gate.holds(j))
        assert taken.worker_host == rescuer.name and taken.lease != first_lease
        for group in groups:
            os.killpg(group, signal.SIGCONT)
        # The woken attempt learns at its next beat that it lost the job.
        assert pid_gone(stale_child), "the stale attempt's child lived on"
        gate.open()
        final = wait_for_job(job.pk)
    finally:
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGCONT)
        if rescuer is not None:
            rescuer.stop()
        frozen.stop()
    written = outcomes_written(frozen, rescuer)
    refused = "not written: the row is no longer this attempt's" in frozen.log_path.read_text()
    print(
        f"chaos frozen-worker: attempts={final.attempts} state={final.state} "
        f"results_written={written[job.pk]} stale_refused={refused}"
    )
    assert final.state == State.SUCCEEDED, final.error
    assert final.worker_host == rescuer.name and final.attempts == 2
    assert written[job.pk] == 1 and refused


def test_sigkills_during_a_batch_end_every_job_with_bounded_attempts(
    worker_factory, demo_model_dir, redis_url, tmp_path
):
    gate = Gate(tmp_path / "gate")  # never opened: the first worker's jobs stay mid-run
    first = worker_factory(["test-kill"], {**chaos_env(redis_url), **gate.env()})
    # The killed child's, the lost worker's, and two still queued behind them.
    jobs = [submit("test-kill") for _ in range(4)]
    ids = [job.pk for job in jobs]
    victim = wait_for_job(jobs[0].pk, until=gate.holds)
    os.kill(victim.child_pid, signal.SIGKILL)  # what the kernel's OOM killer does
    running = wait_for_job(jobs[1].pk, until=gate.holds)  # the worker went on to the next job
    first.kill()  # the whole worker at once, mid-job, as a crashed machine goes
    second = worker_factory(["test-kill"], chaos_env(redis_url))
    try:
        finals = [wait_for_job(pk, timeout_s=300) for pk in ids]
    finally:
        second.stop()
    by_pk = {job.pk: job for job in finals}
    killed_child, lost_worker = by_pk[victim.pk], by_pk[running.pk]
    print(
        f"chaos sigkill: jobs={len(jobs)} "
        f"succeeded={sum(j.state == State.SUCCEEDED for j in finals)} "
        f"failed={sum(j.state == State.FAILED for j in finals)} "
        f"attempts={sum(j.attempts for j in finals)} "
        f"max_attempts={max(j.attempts for j in finals)}"
    )
    assert killed_child.state == State.FAILED
    assert killed_child.error.startswith("killed by signal 9 (SIGKILL)"), killed_child.error
    assert lost_worker.state == State.SUCCEEDED and lost_worker.attempts == 2  # re-run
    assert all(j.state == State.SUCCEEDED for j in finals if j.pk not in (victim.pk,))
    assert max(j.attempts for j in finals) <= settings.ADVISOR_MAX_ATTEMPTS
    written = outcomes_written(first, second)
    assert all(written[pk] == 1 for pk in ids), written
