"""A database outage, for real: the site under gunicorn on a PostgreSQL cluster of its own,
the cluster stopped `immediate` (as a crash or a managed failover stops it) and started
again. While it is down every page and API call answers 503 with Retry-After (never a
500), `/health` names the database; when it is back the same processes serve again. A
worker that meets it (at a delivery, just after its claim, at its outcome) waits for the
database and runs the profile once; the job is neither failed nor run again.

Skipped, with why, where this machine has no PostgreSQL server binaries or no `postgres`
user to run them as (a cluster will not run as root); CI has both."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from advisor.jobs.models import ConversationFile, Job
from tests.conftest import JOB_TIMEOUT_S, ROOT
from tests.e2e.test_production import Site, _free_port
from tests.pg_cluster import Cluster, private_cluster, unavailable
from tests.polling import until

pytestmark = [pytest.mark.slow, pytest.mark.worker]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    why_not = unavailable()
    if why_not:
        pytest.skip(why_not)
    with private_cluster() as found:
        yield found


@pytest.fixture
def site_on(cluster: Cluster, redis_url: str, tmp_path: Path) -> Iterator[Site]:
    env = {**os.environ, "CELERY_BROKER_URL": redis_url, "DATABASE_URL": cluster.url,
           "ADVISOR_PRODUCTION": "1", "SECRET_KEY": secrets.token_urlsafe(50),
           "ALLOWED_HOSTS": "127.0.0.1", "ADVISOR_SSL_REDIRECT": "0",
           "STATIC_ROOT": str(tmp_path / "static")}  # fmt: skip
    for name in ("ADVISOR_DB_NAME", "REDIS_URL", "ADVISOR_TEST_DB_NAME"):
        env.pop(name, None)
    for step in (["migrate", "--noinput", "-v", "0"], ["collectstatic", "--noinput", "-v", "0"]):
        done = subprocess.run([sys.executable, "manage.py", *step], cwd=ROOT, env=env,
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "advisor.wsgi", "-w", "2", "-b", f"127.0.0.1:{port}",
         "--log-level", "warning"], cwd=ROOT, env=env,
    )  # fmt: skip
    site = Site(port, tmp_path / "static")
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                site.request("GET", "/health")
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "no gunicorn"
                time.sleep(0.3)
        yield site
    finally:
        server.terminate()
        server.wait(15)


PAGES = ["/", "/jobs/", "/api/v1/jobs/no-such-token-0000000", "/jobs/no-such-token-0000000/"]


def test_a_database_outage_answers_503_with_retry_after_and_the_site_serves_again(
    cluster: Cluster, site_on: Site
) -> None:
    for path in PAGES:
        response, _ = site_on.request("GET", path)
        assert response.status < 500, (path, response.status)
    cluster.stop_immediate()
    try:
        for path in PAGES:
            response, body = site_on.request("GET", path)
            assert response.status == 503, (path, response.status, body[:300])
            assert int(response.getheader("Retry-After")) > 0
            if path.startswith("/api/"):
                assert "unreachable" in json.loads(body)["error"]
            else:
                assert b"Try again" in body
        # A submission through the API: refused, as "try again", with nothing saved.
        submit = json.dumps({"model_source": "demo", "model_name": "demo"})
        response, body = site_on.request("POST", "/api/v1/jobs", submit,
                                         **{"Content-Type": "application/json"})  # fmt: skip
        assert response.status == 503, body[:300]
        response, body = site_on.request("GET", "/health")
        checks = json.loads(body)["checks"]
        assert response.status == 503 and int(response.getheader("Retry-After")) > 0
        assert not checks["database"]["ok"] and checks["broker"]["ok"]
    finally:
        cluster.start()
    # Back: the same gunicorn processes open fresh connections; no restart.
    for path in PAGES:
        response, _ = site_on.request("GET", path)
        assert response.status < 500, (path, response.status)
    response, body = site_on.request("GET", "/health")
    assert response.status == 200 and json.loads(body)["checks"]["database"]["ok"]


def worker_on(cluster: Cluster) -> dict[str, str]:
    """The environment of a worker process on `cluster`'s database, migrated; a lease
    valid for 28 s after its last beat (the stale limit less two beats)."""
    env = {**os.environ, "DATABASE_URL": cluster.url, "DJANGO_SETTINGS_MODULE": "advisor.settings",
           "ADVISOR_HEARTBEAT_S": "1", "ADVISOR_HEARTBEAT_STALE_S": "30",
           "ADVISOR_WORKER_GPUS": "",  # a CPU worker: no device probe
           "ADVISOR_DEMO_DIR": str(settings.ADVISOR_DEMO_DIR)}  # fmt: skip
    for name in ("ADVISOR_DB_NAME", "ADVISOR_TEST_DB_NAME"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return env


# A worker whose profile is done when the database is away: record() keeps the outcome
# and writes it once the database is back, within the lease; no profile is run again.
RECORD = """
import sys, time, django
django.setup()
from advisor.jobs import child, tasks
from advisor.jobs.models import Job
job = Job.objects.create(model_source="demo", model_name="demo")
lease = Job.objects.claim(job.pk, "outage-test")
clock = tasks.LeaseClock()
print(job.pk, flush=True)
sys.stdin.readline()  # the test has stopped the database
start = time.monotonic()
tasks.record(job.pk, lease, child.Outcome("succeeded", {"environment": {"device": "cpu"}}), clock)
row = Job.objects.get(pk=job.pk)
print(row.state, row.attempts, round(time.monotonic() - start, 1), flush=True)
"""


def test_a_finished_profile_is_written_after_a_database_blip_not_run_again(
    cluster: Cluster, tmp_path: Path
) -> None:
    env = worker_on(cluster)
    worker = subprocess.Popen([sys.executable, "-c", RECORD], cwd=ROOT, env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    assert worker.stdin is not None and worker.stdout is not None
    try:
        worker.stdout.readline()  # claimed
        cluster.stop_immediate()
        worker.stdin.write("go\n")
        worker.stdin.flush()
        time.sleep(4)  # the write meets the outage and retries
        assert worker.poll() is None, "record() gave up within seconds of a blip"
        cluster.start()
        state, attempts, waited = worker.stdout.readline().split()
        assert worker.wait(60) == 0
    finally:
        worker.kill()
    # Written by the attempt that ran it, once: the profile is not run a second time.
    assert (state, attempts) == ("succeeded", "1")
    assert float(waited) >= 4


# One delivery of a quick demo job, run as the worker runs it, once the test says "go".
ATTEMPT = """
import sys, time, django
django.setup()
from advisor.jobs import tasks
from advisor.jobs.models import Job
job = Job.objects.create(model_source="demo", model_name="demo", quick=True,
                         prompt_tokens=32, output_tokens=8, concurrency=2)
print(job.pk, flush=True)
sys.stdin.readline()
start = time.monotonic()
tasks.run_job(job.pk)
row = Job.objects.get(pk=job.pk)
print(row.state, row.attempts, round(time.monotonic() - start, 1), flush=True)
print(row.error.replace("\\n", " "), flush=True)
"""


@contextlib.contextmanager
def delivery(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen, int]]:
    worker = subprocess.Popen([sys.executable, "-c", ATTEMPT], cwd=ROOT, env=env,
                              text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    assert worker.stdin is not None and worker.stdout is not None
    try:
        yield worker, int(worker.stdout.readline())
    finally:
        worker.kill()


def go(worker: subprocess.Popen) -> None:
    assert worker.stdin is not None
    worker.stdin.write("go\n")
    worker.stdin.flush()


def ending(worker: subprocess.Popen) -> tuple[str, str, float, str]:
    """The job's state, attempts, the seconds run_job took, and its error."""
    assert worker.stdout is not None
    state, attempts, waited = worker.stdout.readline().split()
    error = worker.stdout.readline().strip()
    assert worker.wait(JOB_TIMEOUT_S) == 0
    return state, attempts, float(waited), error


# A delivery that meets the outage before its claim holds its message and waits; dropped,
# it would wait for the reaper to publish the job again.
def test_a_delivery_during_an_outage_waits_for_its_claim(
    cluster: Cluster, demo_model_dir: Path
) -> None:
    with delivery(worker_on(cluster)) as (worker, _):
        cluster.stop_immediate()
        go(worker)
        time.sleep(4)
        assert worker.poll() is None, "the delivery gave up within seconds of a blip"
        cluster.start()
        state, attempts, waited, error = ending(worker)
    assert (state, attempts, error) == ("succeeded", "1", "")
    assert waited >= 4


# A delivery whose first queries after the claim meet the outage (bench/db_outage.py saw
# it: the outage began as a job ended and the next was claimed). The attempt waits for
# the database as the outcome does, and runs its profile once; the job is not failed.
def test_an_outage_just_after_the_claim_costs_a_wait_not_the_job(
    cluster: Cluster, demo_model_dir: Path
) -> None:
    env = worker_on(cluster)
    # The config's read of the uploads is the attempt's first query after the claim and
    # its row's read: holding their table locked stops the attempt right there, so the
    # outage meets it mid-query however fast or slow this machine is.
    holder = psycopg.connect(cluster.url)
    holder.execute(f"LOCK TABLE {ConversationFile._meta.db_table} IN ACCESS EXCLUSIVE MODE")
    try:
        with delivery(env) as (worker, pk):
            go(worker)
            with psycopg.connect(cluster.url, autocommit=True) as watcher:
                waits = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                row = f"SELECT state, attempts FROM {Job._meta.db_table} WHERE id = %s"
                assert until(lambda: watcher.execute(waits).fetchone()[0] == 1, 60), "no wait"
                assert watcher.execute(row, (pk,)).fetchone() == ("running", 1)
            cluster.stop_immediate()
            time.sleep(4)
            cluster.start()
            state, attempts, waited, error = ending(worker)
    finally:
        with contextlib.suppress(psycopg.Error):
            holder.close()
    assert (state, attempts, error) == ("succeeded", "1", "")
    assert waited >= 4
