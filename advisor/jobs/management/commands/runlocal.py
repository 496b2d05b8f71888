"""`manage.py runlocal`: the whole app on one machine, one command.

Embedded Redis, migrations, the demo models, one CPU Celery worker (which
also runs the reaper) and the development server with DEBUG on. Ctrl-C stops it all.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from advisor import embedded_redis
from advisor.jobs.models import Job

STOP_GRACE_S = 10
DEMO_MODELS = ("demo",)


def worker_name() -> str:
    """Unique per `runlocal` process: a second one on the same machine must not take over
    (and, on stopping, delete) the first one's live worker row."""
    return f"local-{os.getpid()}@%h"


def worker_argv() -> list[str]:
    return [
        sys.executable, "-m", "celery", "-A", "advisor", "worker",
        "-Q", "cpu,default", "--concurrency", "1", "--pool", "prefork",
        "--max-tasks-per-child", "1", "-n", worker_name(), "-l", "info",
    ]  # fmt: skip


def demo_argv(name: str) -> list[str]:
    # In a child process: this one (and the site it starts) never imports torch.
    code = (
        "from profiling.cli import StderrProgress; from profiling.model.demo import ensure_demo; "
        f"ensure_demo({name!r}, progress=StderrProgress())"
    )
    return [sys.executable, "-c", code]


class Command(BaseCommand):
    help = (
        "Run the site at 127.0.0.1:8000 with a CPU worker, an embedded Redis and the demo models."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--skip-demo", action="store_true", help="do not build the demo models")

    def handle(self, *args: Any, addrport: str, skip_demo: bool, **options: Any) -> None:
        fresh_broker = self.start_broker()
        call_command("migrate", interactive=False, verbosity=1)
        if fresh_broker:
            # A new embedded Redis holds no messages: queued jobs are published again.
            Job.objects.filter(state=Job.State.QUEUED).update(dispatched_at=None)
        if not skip_demo:
            self.build_demo()
        env = {**os.environ, "ADVISOR_DEBUG": "1"}
        manage = str(settings.BASE_DIR / "manage.py")
        children = {
            "worker": _spawn(worker_argv(), env),
            "site": _spawn([sys.executable, manage, "runserver", addrport], env),
        }
        self.stdout.write(f"\nBottleneck Advisor: http://{addrport}/  (Ctrl-C stops everything)\n")
        try:
            self.supervise(children)
        finally:
            # A second Ctrl-C must not cut the clean-up short (it takes seconds at most).
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            for name, proc in reversed(children.items()):
                _stop(name, proc, self.stdout.write)
            if fresh_broker:
                embedded_redis.stop(settings.ADVISOR_EMBEDDED_REDIS)

    def start_broker(self) -> bool:
        """Start the embedded Redis when no broker is configured; True if started now."""
        socket = settings.ADVISOR_EMBEDDED_REDIS
        if not socket:
            self.stdout.write(f"broker: {settings.CELERY_BROKER_URL}")
            return False
        started = embedded_redis.ensure(socket)
        self.stdout.write(
            f"broker: embedded Redis on {socket}{'' if started else ' (already running)'}"
        )
        return started

    def build_demo(self) -> None:
        demo_dir = settings.ADVISOR_DEMO_DIR
        env = {**os.environ, "ADVISOR_DEMO_DIR": str(demo_dir)}
        for name in DEMO_MODELS:
            self.stdout.write(f"demo model {name!r} in {demo_dir} (built once, on the first run)…")
            began = time.monotonic()
            if subprocess.run(demo_argv(name), env=env).returncode != 0:
                raise CommandError(f"building the demo model {name!r} failed (see above)")
            self.stdout.write(f"demo model {name!r} ready ({time.monotonic() - began:.1f} s)")

    def supervise(self, children: dict[str, subprocess.Popen]) -> None:
        """Wait for Ctrl-C (or SIGTERM); a child that dies stops the rest."""
        for signum in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: it may arrive ignored
            signal.signal(signum, _interrupt)
        try:
            while True:
                for name, proc in children.items():
                    if proc.poll() is not None:
                        raise CommandError(f"the {name} exited with status {proc.returncode}")
                time.sleep(0.5)
        except KeyboardInterrupt:
            self.stdout.write("\nstopping…")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _spawn(argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    # Own process group: the terminal's Ctrl-C reaches only this command,
    # which then stops each group in order (a job's child included).
    return subprocess.Popen(argv, env=env, cwd=settings.BASE_DIR, start_new_session=True)


def _stop(name: str, proc: subprocess.Popen, say: Any) -> None:
    if proc.poll() is None:
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            say(f"{name} did not stop in {STOP_GRACE_S} s; killing it")
    _signal_group(proc, signal.SIGKILL)  # whatever it left behind in its group
    proc.wait()


def _signal_group(proc: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)
