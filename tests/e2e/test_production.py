"""The production server setting, for real: gunicorn with several worker processes,
ADVISOR_PRODUCTION=1, collected and compressed static files, the health check,
and rate limits that hold across those processes for cookie-less clients."""

from __future__ import annotations

import http.client
import json
import re
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from advisor.jobs.models import Comment, Job
from tests.conftest import ROOT, worker_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
COMMENT_RATE = 5
# django-ratelimit counts in fixed windows (offset per key): a day's window is not
# crossed while the test posts, where a minute's is, now and then, on a slow machine.
COMMENT_WINDOW = "d"


@dataclass
class Site:
    port: int
    static_root: Path

    def request(self, method: str, path: str, body: str = "", **headers: str):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body or None, headers={"Host": "127.0.0.1", **headers})
            response = conn.getresponse()
            return response, response.read()
        finally:
            conn.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def site(redis_url: str, tmp_path: Path) -> Iterator[Site]:
    static_root = tmp_path / "static"
    env = worker_env(redis_url, {
        "ADVISOR_PRODUCTION": "1", "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1", "ADVISOR_SSL_REDIRECT": "0",
        "STATIC_ROOT": str(static_root), "ADVISOR_COMMENT_RATE": f"{COMMENT_RATE}/{COMMENT_WINDOW}",
    })  # fmt: skip
    collect = [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"]
    done = subprocess.run(collect, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    port = _free_port()
    argv = [sys.executable, "-m", "gunicorn", "advisor.wsgi", "-w", "3",
            "-b", f"127.0.0.1:{port}", "--log-level", "warning"]  # fmt: skip
    server = subprocess.Popen(argv, cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 600  # a backstop: Django starting on a busy machine
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not start"
                assert server.poll() is None, "gunicorn exited"
                time.sleep(0.2)
        yield Site(port, static_root)
    finally:
        server.terminate()
        server.wait(15)


@pytest.mark.postgres
def test_the_health_check_reports_database_broker_cache_and_workers(site):
    response, body = site.request("GET", "/health")
    assert response.status == 200, body
    health = json.loads(body)
    assert health["ok"] is True
    assert all(health["checks"][name]["ok"] for name in ("database", "broker", "cache"))
    assert isinstance(health["workers"], list)


def test_static_files_are_served_compressed_with_hashed_names(site):
    manifest = json.loads((site.static_root / "staticfiles.json").read_text())
    hashed = manifest["paths"]["plotly/plotly.min.js"]
    assert (site.static_root / (hashed + ".gz")).is_file()
    response, body = site.request("GET", f"/static/{hashed}", **{"Accept-Encoding": "gzip"})
    assert response.status == 200
    assert response.getheader("Content-Encoding") == "gzip"
    plain = (site.static_root / hashed).stat().st_size
    assert len(body) < plain / 3, (len(body), plain)
    assert "max-age" in (response.getheader("Cache-Control") or "")


def test_the_comment_limit_holds_across_processes_for_cookieless_clients(site):
    job = Job.objects.create(model_name="demo", state=Job.State.FAILED, error="x")
    page = f"/jobs/{job.share_token}/"
    statuses = []
    for n in range(4 * COMMENT_RATE):  # each a new client: no cookie kept between posts
        response, body = site.request("GET", page)
        token = CSRF_INPUT.search(body.decode()).group(1)
        cookies = response.headers.get_all("Set-Cookie") or []
        cookie = next(c.split(";")[0] for c in cookies if c.startswith("csrftoken="))
        form = f"text=post+{n}&author=&csrfmiddlewaretoken={token}"
        response, _ = site.request(
            "POST", f"/reports/{job.share_token}/comments", form,
            **{"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"},
        )  # fmt: skip
        statuses.append(response.status)
        if response.status == 429:
            assert int(response.getheader("Retry-After")) >= 1
    assert statuses.count(302) == COMMENT_RATE, statuses
    assert statuses.count(429) == 3 * COMMENT_RATE
    assert Comment.objects.filter(job=job).count() == COMMENT_RATE
