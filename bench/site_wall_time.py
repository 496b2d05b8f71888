"""Goal: a quick demo profile goes from submit to report in <= 30 s on 2 CPU cores.

One run, fresh state: a temporary SQLite database and embedded Redis, a real
Celery worker process (as `manage.py runlocal` starts it), the form posted
through Django's test client with CSRF enforced, the job page polled until
the report renders. The demo models are built beforehand (their one-off
build is not part of a profile) and reused from ADVISOR_DEMO_DIR.
Also times `python -m profiling profile demo --quick` run directly, so the
site's own overhead (queue, worker, child process start) shows as the gap.

    python bench/site_wall_time.py [--json]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_SECONDS = 30.0
FORM = {
    "model_source": "demo", "model_name": "demo", "dtype": "auto", "quick": "on",
    "gpu_kind": "", "gpu_count": "1", "run_on": "cpu",
    "prompt_tokens": "512", "output_tokens": "128", "concurrency": "8",
    "shared_prefix_tokens": "0", "ttft_ms": "", "tpot_ms": "",
    "stated_bottleneck": "unsure", "notes": "bench",
}  # fmt: skip


def prepare_environment(var_dir: str) -> None:
    os.environ["ADVISOR_VAR_DIR"] = var_dir
    os.environ.setdefault("ADVISOR_DEMO_DIR", str(ROOT / "var" / "demo"))
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ.pop("DATABASE_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "advisor.settings"
    sys.path.insert(0, str(ROOT))


def build_demo() -> None:
    code = "from profiling.model.demo import ensure_demo; ensure_demo('demo')"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def start_worker() -> subprocess.Popen[bytes]:
    from advisor.jobs.management.commands.runlocal import worker_argv

    argv = [a for a in worker_argv() if a != "-B"]  # no beat: nothing to reap here
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for_worker(timeout_s: float = 120) -> None:
    from advisor.jobs.models import Worker

    deadline = time.monotonic() + timeout_s
    while not Worker.objects.serving("cpu").exists():
        if time.monotonic() > deadline:
            raise SystemExit("the worker did not announce itself")
        time.sleep(0.2)


def submit_and_wait(timeout_s: float = 300) -> float:
    """Seconds from the form POST to the rendered report page."""
    from django.test import Client

    # Not under the test runner, so "testserver" is no allowed host: use a local one.
    client = Client(enforce_csrf_checks=True, HTTP_HOST="127.0.0.1")
    page = client.get("/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    started = time.perf_counter()
    response = client.post("/", {**FORM, "csrfmiddlewaretoken": token})
    if response.status_code != 302:
        raise SystemExit(f"the form was refused: {response.status_code}")
    url = response["Location"]
    while time.perf_counter() - started < timeout_s:
        status = client.get(url.rstrip("/") + "/status").json()
        if status["state"] not in ("queued", "running"):
            break
        time.sleep(0.2)
    report = client.get(url).content.decode()
    elapsed = time.perf_counter() - started
    if "decode" not in report.lower() or status["state"] != "succeeded":
        raise SystemExit(f"the job ended {status['state']}: {status}")
    return elapsed


def direct_cli_seconds(out: Path) -> float:
    started = time.perf_counter()
    argv = [sys.executable, "-m", "profiling", "profile", "demo", "--device", "cpu", "--quick"]
    subprocess.run([*argv, "--json", str(out)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="advisor-bench-") as var_dir:
        prepare_environment(var_dir)
        build_demo()
        import django
        from django.core.management import call_command

        django.setup()
        from django.conf import settings

        from advisor import embedded_redis

        embedded_redis.ensure(settings.ADVISOR_EMBEDDED_REDIS)
        call_command("migrate", interactive=False, verbosity=0)
        worker = start_worker()
        try:
            wait_for_worker()
            site_s = submit_and_wait()
        finally:
            worker.terminate()
            worker.wait(timeout=30)
            embedded_redis.stop(settings.ADVISOR_EMBEDDED_REDIS)
        cli_s = direct_cli_seconds(Path(var_dir) / "direct.json")
    result = {"site_seconds": site_s, "cli_seconds": cli_s, "goal_seconds": GOAL_SECONDS}
    if "--json" in sys.argv:
        print(json.dumps(result))
    else:
        verdict = "meets" if site_s <= GOAL_SECONDS else "misses"
        print(f"submit -> report through the site: {site_s:6.1f} s  ({verdict} goal <= 30 s)")
        print(f"same profile, CLI run directly:      {cli_s:6.1f} s")
        print(f"site overhead (queue, worker, child): {site_s - cli_s:+6.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
