"""Goal: under 20 concurrent clients, the report page's server time p50 <= 50 ms and
the job list's <= 30 ms, with 0 errors, on the production server setting.

One run, fresh state: a temporary database (SQLite, or --database-url), an
embedded Redis, 30 succeeded jobs holding a stored result (the checked-in CLI
result of tests/advisor/fixtures), one browser session owning them, and the
site under gunicorn (sync workers, ADVISOR_PRODUCTION=1). Each target gets
`--clients` threads for `--seconds`; the table shows requests per second, the
client's p50/p99 and the server's own time per request (gunicorn's %(D)s).

    python bench/load.py [--clients 20] [--seconds 30] [--workers 3] [--json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "tests" / "advisor" / "fixtures" / "cli_caching_parallel.json"
GOALS_MS = {"report": 50.0, "job list": 30.0}
JOBS = 30

SEED = """
import json, sys
from django.contrib.sessions.backends.db import SessionStore
from advisor.jobs.models import Job
from advisor.jobs.ownership import SESSION_KEY
result = json.load(open(sys.argv[1]))
jobs = [Job.objects.create(model_name="demo", state="succeeded", result=result, progress=1.0)
        for _ in range(int(sys.argv[2]))]
session = SessionStore()
session[SESSION_KEY] = [job.share_token for job in jobs]
session.create()
print(json.dumps({"session": session.session_key, "token": jobs[0].share_token}))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def environment(var_dir: Path, database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "REDIS_URL")}
    env.update(
        ADVISOR_VAR_DIR=str(var_dir), ADVISOR_PRODUCTION="1", ADVISOR_SSL_REDIRECT="0",
        SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="127.0.0.1",
        DJANGO_SETTINGS_MODULE="advisor.settings", PYTHONPATH=str(ROOT),
    )  # fmt: skip
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def prepare(env: dict[str, str]) -> dict[str, str]:
    run = {"cwd": ROOT, "env": env, "check": True, "capture_output": True, "text": True}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], **run)
    code = "import django; django.setup()\n" + SEED
    done = subprocess.run([sys.executable, "-c", code, str(RESULT), str(JOBS)], **run)
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_server(env: dict[str, str], port: int, workers: int, log: Path) -> subprocess.Popen:
    argv = [
        sys.executable, "-m", "gunicorn", "advisor.wsgi", "-w", str(workers),
        "-b", f"127.0.0.1:{port}", "--access-logfile", str(log),
        "--access-logformat", "%(U)s %(s)s %(D)s", "--log-level", "warning",
    ]  # fmt: skip
    server = subprocess.Popen(argv, cwd=ROOT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("gunicorn did not start")


def hammer(port: int, path: str, cookie: str, clients: int, seconds: float) -> dict:
    """`clients` threads, each with a kept-alive connection, for `seconds`."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    headers = {"Cookie": cookie, "Host": "127.0.0.1"}

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while time.monotonic() < stop:
            start = time.perf_counter()
            try:
                conn.request("GET", path, headers=headers)
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                ok = False
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                errors[0] += 0 if ok else 1
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    begun = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - begun
    ordered = sorted(latencies)
    return {
        "requests": len(ordered),
        "req_s": len(ordered) / wall,
        "p50_ms": 1e3 * ordered[len(ordered) // 2],
        "p99_ms": 1e3 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "errors": errors[0],
    }


def server_times(log: Path, path: str) -> dict[str, float]:
    """The server's own time per request of `path` (gunicorn's %(D)s, microseconds)."""
    times = []
    for line in log.read_text().splitlines():
        url, _status, micros = line.rsplit(" ", 2)
        if url == path.split("?")[0]:
            times.append(int(micros) / 1e3)
    times.sort()
    if not times:
        return {"server_p50_ms": float("nan"), "server_p99_ms": float("nan")}
    return {
        "server_p50_ms": statistics.median(times),
        "server_p99_ms": times[min(len(times) - 1, int(len(times) * 0.99))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--database-url", help="a PostgreSQL database to use (it is migrated)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="advisor-load-", dir="/tmp") as tmp:
        var_dir = Path(tmp)
        env = environment(var_dir, args.database_url)
        seeded = prepare(env)
        port, log = free_port(), var_dir / "access.log"
        server = start_server(env, port, args.workers, log)
        cookie = f"sessionid={seeded['session']}"
        targets = {
            "report": f"/jobs/{seeded['token']}/",
            "job list": "/jobs/",
            "api job": f"/api/v1/jobs/{seeded['token']}",
        }
        rows = {}
        try:
            for name, path in targets.items():
                hammer(port, path, cookie, 2, 2.0)  # warm every worker
                log.write_text("")
                rows[name] = {
                    "path": path,
                    **hammer(port, path, cookie, args.clients, args.seconds),
                }
                rows[name].update(server_times(log, path))
        finally:
            server.terminate()
            server.wait(10)
            subprocess.run(
                [sys.executable, "-c", "from advisor import embedded_redis as e; "
                 f"e.stop({str(var_dir / 'redis.sock')!r})"],
                cwd=ROOT, env=env, check=False,
            )  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{args.clients} clients × {args.seconds:g} s per target, gunicorn {args.workers} sync "
          f"workers, {os.cpu_count()} cores")  # fmt: skip
    print(f"{'target':<10} {'req/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'server p50':>11} "
          f"{'server p99':>11} {'errors':>7}  goal")  # fmt: skip
    for name, row in rows.items():
        goal = GOALS_MS.get(name)
        verdict = "" if goal is None else (
            f"server p50 <= {goal:g} ms: {'met' if row['server_p50_ms'] <= goal else 'NOT met'}"
        )  # fmt: skip
        print(f"{name:<10} {row['req_s']:>7.1f} {row['p50_ms']:>8.1f} {row['p99_ms']:>8.1f} "
              f"{row['server_p50_ms']:>11.1f} {row['server_p99_ms']:>11.1f} {row['errors']:>7}  "
              f"{verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
