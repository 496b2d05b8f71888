"""A database outage, for real: the site under gunicorn on a PostgreSQL cluster of its own,
the cluster stopped `immediate` (as a crash or a managed failover stops it) and started
again. While it is down every page and API call answers 503 with Retry-After (never a
500), `/health` names the database; when it is back the same processes serve again.

Skipped, with why, where this machine has no PostgreSQL server binaries or no `postgres`
user to run them as (a cluster will not run as root); CI has both."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.e2e.test_production import Site, _free_port

pytestmark = [pytest.mark.slow, pytest.mark.worker]
BINARIES = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))


@dataclass
class Cluster:
    data: Path
    port: int

    def ctl(self, *args: str) -> None:
        sock = self.data.parent / "sock"
        command = [str(BINARIES[-1]), "-D", str(self.data), "-w", "-t", "60", *args]
        if args[0] == "start":
            options = f"-p {self.port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off"
            command += ["-o", options, "-l", str(self.data.parent / "log")]
        done = subprocess.run(["runuser", "-u", "postgres", "--", *command],
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    if not BINARIES:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql")
    try:
        owner = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user to run a cluster as")
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("starting a cluster as the postgres user needs root and runuser")
    home = Path(tempfile.mkdtemp(prefix="advisor-pg-", dir="/tmp"))
    os.chown(home, owner.pw_uid, owner.pw_gid)
    (home / "sock").mkdir()
    os.chown(home / "sock", owner.pw_uid, owner.pw_gid)
    data = home / "data"
    initdb = BINARIES[-1].parent / "initdb"
    done = subprocess.run(
        ["runuser", "-u", "postgres", "--", str(initdb), "-D", str(data), "-A", "trust",
         "-U", "postgres", "--no-sync"], capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = Cluster(data, _free_port())
    found.ctl("start")
    try:
        yield found
    finally:
        subprocess.run(["runuser", "-u", "postgres", "--", str(BINARIES[-1]), "-D", str(data),
                        "-m", "immediate", "stop"], capture_output=True)  # fmt: skip
        shutil.rmtree(home, ignore_errors=True)


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
    cluster.ctl("-m", "immediate", "stop")
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
        assert response.status == 503
        assert not checks["database"]["ok"] and checks["broker"]["ok"]
    finally:
        cluster.ctl("start")
    # Back: the same gunicorn processes open fresh connections; no restart.
    for path in PAGES:
        response, _ = site_on.request("GET", path)
        assert response.status < 500, (path, response.status)
    response, body = site_on.request("GET", "/health")
    assert response.status == 200 and json.loads(body)["checks"]["database"]["ok"]


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
    env = {**os.environ, "DATABASE_URL": cluster.url, "DJANGO_SETTINGS_MODULE": "advisor.settings",
           "ADVISOR_HEARTBEAT_S": "1", "ADVISOR_HEARTBEAT_STALE_S": "30"}  # fmt: skip
    for name in ("ADVISOR_DB_NAME", "ADVISOR_TEST_DB_NAME"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    worker = subprocess.Popen([sys.executable, "-c", RECORD], cwd=ROOT, env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    assert worker.stdin is not None and worker.stdout is not None
    try:
        worker.stdout.readline()  # claimed
        cluster.ctl("-m", "immediate", "stop")
        worker.stdin.write("go\n")
        worker.stdin.flush()
        time.sleep(4)  # the write meets the outage and retries
        assert worker.poll() is None, "record() gave up within seconds of a blip"
        cluster.ctl("start")
        state, attempts, waited = worker.stdout.readline().split()
        assert worker.wait(60) == 0
    finally:
        worker.kill()
    # Written by the attempt that ran it, once: the profile is not run a second time.
    assert (state, attempts) == ("succeeded", "1")
    assert float(waited) >= 4
