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
