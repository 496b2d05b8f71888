"""Goal: a quick demo profile with every experiment goes from submit to report in
<= 30 s on 2 idle CPU cores.

One run, fresh state: a temporary SQLite database and embedded Redis, a real
Celery worker process (as `manage.py runlocal` starts it), the form posted
through Django's test client with CSRF enforced, the job page polled until
the report renders. The demo models are built beforehand (their one-off
build is not part of a profile) and reused from ADVISOR_DEMO_DIR.
Every experiment is ticked, with the form's own defaults for each (the draft,
the K values, the precisions), at its default workload with a shared prefix and
a TPOT target. Also times the same profile through `python -m profiling profile
demo --quick` run directly, so the site's own overhead (queue, worker, child
process start) shows as the gap. `--baseline-only` leaves the experiments out.

    python bench/site_wall_time.py [--json] [--baseline-only]
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
    "shared_prefix_tokens": "384", "ttft_ms": "", "tpot_ms": "5",
    "stated_bottleneck": "unsure", "notes": "bench",
}  # fmt: skip
EXPERIMENTS = ("speculative", "quantization", "caching", "parallel")


def form_data(every_experiment: bool) -> dict[str, object]:
    """The fields a browser posts: the workload above, and each experiment ticked with
    the values the form starts with (a switch left on, precisions pre-selected)."""
    if not every_experiment:
        return dict(FORM)
    from advisor.jobs.forms import JobForm

    initial = JobForm().initial
    ticked = {f"run_{name}": "on" for name in EXPERIMENTS}
    options = {"prompt_lookup": "on" if initial.get("prompt_lookup") else ""}
    options["precisions"] = list(initial.get("precisions") or [])
    return {**FORM, **ticked, **options}


def cli_argv(every_experiment: bool) -> list[str]:
    """The same profile as `python -m profiling profile` arguments."""
    argv = ["demo", "--device", "cpu", "--quick", "--prompt-tokens", FORM["prompt_tokens"],
            "--output-tokens", FORM["output_tokens"], "--concurrency", FORM["concurrency"],
            "--shared-prefix-tokens", FORM["shared_prefix_tokens"],
            "--tpot-ms", FORM["tpot_ms"]]  # fmt: skip
    return argv + (["--experiments", ",".join(EXPERIMENTS)] if every_experiment else [])


def prepare_environment(var_dir: str) -> None:
    os.environ["ADVISOR_VAR_DIR"] = var_dir
    os.environ.setdefault("ADVISOR_DEMO_DIR", str(ROOT / "var" / "demo"))
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ.pop("DATABASE_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "advisor.settings"
    sys.path.insert(0, str(ROOT))


def build_demo() -> None:
    code = "from profiling.model.demo import DEMO_MODELS, ensure_demo\n"
    code += "for name in DEMO_MODELS: ensure_demo(name)"  # the target and its draft
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


def submit_and_wait(data: dict[str, object], timeout_s: float = 600) -> float:
    """Seconds from the form POST to the rendered report page."""
    from django.test import Client

    # Not under the test runner, so "testserver" is no allowed host: use a local one.
    client = Client(enforce_csrf_checks=True, HTTP_HOST="127.0.0.1")
    page = client.get("/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    started = time.perf_counter()
    response = client.post("/", {**data, "csrfmiddlewaretoken": token})
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


def direct_cli_seconds(out: Path, every_experiment: bool) -> float:
    started = time.perf_counter()
    argv = [sys.executable, "-m", "profiling", "profile", *cli_argv(every_experiment)]
    subprocess.run([*argv, "--json", str(out)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    every_experiment = "--baseline-only" not in sys.argv
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
            site_s = submit_and_wait(form_data(every_experiment))
        finally:
            worker.terminate()
            worker.wait(timeout=30)
            embedded_redis.stop(settings.ADVISOR_EMBEDDED_REDIS)
        cli_s = direct_cli_seconds(Path(var_dir) / "direct.json", every_experiment)
        phases = json.loads((Path(var_dir) / "direct.json").read_text())["phase_seconds"]
    result = {
        "site_seconds": site_s, "cli_seconds": cli_s, "goal_seconds": GOAL_SECONDS,
        "every_experiment": every_experiment, "cli_phase_seconds": phases,
    }  # fmt: skip
    if "--json" in sys.argv:
        print(json.dumps(result))
    else:
        verdict = "meets" if site_s <= GOAL_SECONDS else "misses"
        print(f"submit -> report through the site: {site_s:6.1f} s  ({verdict} goal <= 30 s)")
        print(f"same profile, CLI run directly:      {cli_s:6.1f} s")
        print(f"site overhead (queue, worker, child): {site_s - cli_s:+6.1f} s")
        which = "every experiment" if every_experiment else "the baseline alone"
        spent = " · ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items())
        print(f"CLI phases ({which}): {spent}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
