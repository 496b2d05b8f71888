"""Shared fixtures: a real Redis, the demo model, real Celery worker processes.

Worker tests use the database through `transactional_db` (or
`@pytest.mark.django_db(transaction=True)`), so the worker subprocess sees
committed rows; on SQLite the test database is a file shared with it.

    def test_it_runs(celery_worker_proc, transactional_db):
        job = dispatch.submit(model_source="demo", model_name="demo", queue="cpu")
        job = wait_for_job(job.pk)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.conf import settings

from advisor import embedded_redis
from advisor.jobs.models import Job, Worker

ROOT = Path(__file__).resolve().parent.parent
# The tiers (pyproject's markers), each run by scripts/test as a pytest process of its own.
# A test is in every tier one of its fixtures needs; a module marks what no fixture shows.
TIER_OF_FIXTURE = {
    "demo_model_dir": "model",
    "celery_worker_proc": "worker",
    "worker_factory": "worker",
    "chromium": "browser",
}
# Set by scripts/test for the tier that needs nothing heavy: a test there that reaches for
# the demo model fails, naming the marker it lacks, instead of quietly building one.
FAST_TIER_ENV = "ADVISOR_TEST_FAST_TIER"
WORKER_START_TIMEOUT_S = 90
# Generous: two busy cores can make a quick profile take several times its usual time.
JOB_TIMEOUT_S = 240
# A test worker's knobs: fast beats so cancels and faults show within seconds.
TEST_WORKER_ENV = {
    "ADVISOR_HEARTBEAT_S": "1",
    "ADVISOR_WORKER_HEARTBEAT_S": "1",
    "CELERY_SKIP_CHECKS": "1",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        for tier in sorted({TIER_OF_FIXTURE[f] for f in fixtures if f in TIER_OF_FIXTURE}):
            item.add_marker(tier)


@pytest.fixture(scope="session", autouse=True)
def _fresh_sizing_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every run counts each model it sizes afresh (its children too): a sizing cached by
    an earlier run of other code cannot answer for this one."""
    saved = os.environ.get("ADVISOR_SIZING_DIR")
    os.environ["ADVISOR_SIZING_DIR"] = str(tmp_path_factory.mktemp("sizing"))
    yield
    if saved is None:
        os.environ.pop("ADVISOR_SIZING_DIR", None)
    else:
        os.environ["ADVISOR_SIZING_DIR"] = saved


@pytest.fixture(scope="session", autouse=True)
def _one_demo_cache() -> Iterator[None]:
    """One demo build per run: this process, its workers and its CLI children all read the
    demo from the site's ADVISOR_DEMO_DIR (scripts/test sets it under var/test).

    In the fast tier there is no demo at all: a look-up in this process fails naming the
    marker its test lacks, and one in a child process fails on a folder that cannot be made.
    """
    if not os.environ.get(FAST_TIER_ENV):
        os.environ["ADVISOR_DEMO_DIR"] = str(settings.ADVISOR_DEMO_DIR)
        yield
        return
    from profiling.model import demo

    def refuse(*_: object, **__: object) -> None:
        pytest.fail("the fast tier builds no demo model: mark this test (or its module) `model`")

    nowhere = "/dev/null/no-demo-in-the-fast-tier"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(demo, "demo_root", refuse)
        patch.setenv("ADVISOR_DEMO_DIR", nowhere)
        patch.setattr(settings, "ADVISOR_DEMO_DIR", nowhere)
        yield


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    django_db_modify_db_settings_parallel_suffix: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A test SQLite file of this session's own: runs in parallel cannot clobber it."""
    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        db.setdefault("TEST", {})["NAME"] = str(tmp_path_factory.mktemp("db") / "test.sqlite3")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The broker URL the tests and their workers share.

    A Redis at CELERY_BROKER_URL / REDIS_URL when set; otherwise an embedded
    redis-server of this session's own, stopped at the end.
    """
    from advisor.celery import app

    if not settings.ADVISOR_EMBEDDED_REDIS:
        yield settings.CELERY_BROKER_URL
        return
    socket = _short_dir(tmp_path_factory) / "redis.sock"
    embedded_redis.ensure(socket)
    url = embedded_redis.url(socket)
    saved = settings.ADVISOR_EMBEDDED_REDIS, app.conf.broker_url
    settings.ADVISOR_EMBEDDED_REDIS, app.conf.broker_url = str(socket), url
    try:
        yield url
    finally:
        settings.ADVISOR_EMBEDDED_REDIS, app.conf.broker_url = saved
        embedded_redis.stop(socket)


@pytest.fixture(scope="session", autouse=True)
def shared_cache(redis_url: str) -> Iterator[None]:
    """The cache in this session's Redis, as every deployment has it (worker
    subprocesses derive the same location from the broker URL they are given)."""
    from django.test import override_settings

    from advisor.settings import cache_location

    location = cache_location(redis_url)
    caches = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": location}}
    with override_settings(CACHES=caches):
        yield


@pytest.fixture(autouse=True)
def _empty_cache(shared_cache: None) -> None:
    """Each test starts with no rate-limit counters or reaper throttle left by another."""
    from django.core.cache import cache

    cache.clear()


def _short_dir(factory: pytest.TempPathFactory) -> Path:
    # A unix socket path must stay under ~100 bytes; pytest's basetemp can be long.
    path = factory.mktemp("redis")
    if len(str(path)) > 80:
        path = Path(f"/tmp/advisor-redis-{uuid.uuid4().hex[:8]}")
        path.mkdir()
    return path


@pytest.fixture(scope="session")
def demo_model_dir() -> Path:
    """The demo model's directory, built once under ADVISOR_DEMO_DIR (later sessions reuse it).

    Built in a child process, as workers do: the test process never imports torch.
    """
    code = "from profiling.model.demo import ensure_demo; print(ensure_demo('demo'))"
    env = {**os.environ, "ADVISOR_DEMO_DIR": str(settings.ADVISOR_DEMO_DIR)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"building the demo model failed:\n{done.stderr[-3000:]}"
    return Path(done.stdout.strip().splitlines()[-1])


@dataclass
class WorkerProcess:
    """A `celery -A advisor worker` subprocess started by a fixture."""

    name: str
    queues: list[str]
    proc: subprocess.Popen
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL its whole process group: no shutdown handlers run."""
        _killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        # Shown by pytest only when the test fails: what the worker was doing.
        print(f"--- log of worker {self.name} ---\n{self.log_tail()}")

    def stop(self, timeout_s: float = 15) -> None:
        """Warm shutdown (SIGTERM), then SIGKILL whatever is left of its group."""
        if self.alive():
            _killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout_s)
        self.kill()


def _killpg(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def worker_env(redis_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker that uses this session's broker and test DB."""
    from django.db import connection

    env = {**os.environ, **TEST_WORKER_ENV, "CELERY_BROKER_URL": redis_url}
    # The pytest process renamed the database to the test one; point the worker there.
    env["ADVISOR_DB_NAME"] = str(connection.settings_dict["NAME"])
    env["ADVISOR_DEMO_DIR"] = str(settings.ADVISOR_DEMO_DIR)
    env.pop("REDIS_URL", None)
    return {**env, **(extra or {})}


def worker_argv(queues: list[str], name: str) -> list[str]:
    """A test worker's command: one pool process, one task per child, on `queues`."""
    return [
        sys.executable, "-m", "celery", "-A", "advisor", "worker", "-Q", ",".join(queues),
        "--concurrency", "1", "--pool", "prefork", "--max-tasks-per-child", "1",
        "-n", name, "-l", "info", "--without-gossip", "--without-mingle",
    ]  # fmt: skip


def start_worker(
    redis_url: str, queues: list[str], log_dir: Path, extra_env: dict[str, str] | None = None
) -> WorkerProcess:
    """Start a worker subprocess and wait until its Worker row appears."""
    name = f"test-{uuid.uuid4().hex[:8]}@%h"
    argv = worker_argv(queues, name)
    log_path = log_dir / f"{name.split('@')[0]}.log"
    env = worker_env(redis_url, extra_env)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    worker = WorkerProcess(name, queues, proc, log_path, env)
    try:
        _wait_announced(worker)
    except BaseException:
        worker.stop()
        raise
    return worker


def _wait_announced(worker: WorkerProcess) -> None:
    prefix = worker.name.split("@")[0] + "@"
    deadline = time.monotonic() + WORKER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        row = Worker.objects.filter(name__startswith=prefix).first()
        if row is not None:
            worker.name = row.name
            return
        if not worker.alive():
            pytest.fail(f"worker exited with {worker.proc.returncode}:\n{worker.log_tail()}")
        time.sleep(0.2)
    pytest.fail(
        f"worker did not announce itself in {WORKER_START_TIMEOUT_S} s:\n{worker.log_tail()}"
    )


@pytest.fixture(scope="session")
def worker_factory(
    django_db_setup: None,
    django_db_blocker: object,
    redis_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., WorkerProcess]]:
    """`worker_factory(queues, extra_env)` starts a worker; all are stopped at the end."""
    started: list[WorkerProcess] = []
    log_dir = tmp_path_factory.mktemp("workers")

    def factory(queues: list[str], extra_env: dict[str, str] | None = None) -> WorkerProcess:
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            worker = start_worker(redis_url, queues, log_dir, extra_env)
        started.append(worker)
        return worker

    yield factory
    for worker in started:
        worker.stop()


@pytest.fixture(scope="session")
def celery_worker_proc(worker_factory: Callable[..., WorkerProcess]) -> WorkerProcess:
    """The session's worker on `cpu` and `default` (concurrency 1, one task per child).

    Tests that profile the demo model also ask for `demo_model_dir`, so it is
    built before the job runs rather than inside it.
    """
    return worker_factory(["cpu", "default"])


@pytest.fixture
def worker(celery_worker_proc: WorkerProcess, transactional_db: None) -> Iterator[WorkerProcess]:
    """The session worker, left idle after the test: active jobs are cancelled."""
    assert celery_worker_proc.alive(), celery_worker_proc.log_tail()
    purge_queues(celery_worker_proc.queues)  # from empty queues: no message of another test
    # The last test's flush removed the worker's row; a test that picks a live worker
    # (the form's "run on") starts once the worker's next beat has put it back.
    _wait_announced(celery_worker_proc)
    yield celery_worker_proc
    settle_jobs()
    print(f"--- log of worker {celery_worker_proc.name} ---\n{celery_worker_proc.log_tail()}")


def purge_queues(names: list[str]) -> None:
    """Drop every message waiting on the broker queues `names`."""
    from advisor.celery import app

    with app.connection_for_write() as connection:
        for name in names:
            connection.default_channel.queue_purge(name)


def settle_jobs(timeout_s: float = 30) -> None:
    """Cancel whatever is still active and wait until no job runs."""
    Job.objects.filter(state=Job.State.QUEUED).update(state=Job.State.CANCELLED)
    Job.objects.filter(state=Job.State.RUNNING).update(cancel_requested=True)
    deadline = time.monotonic() + timeout_s
    while Job.objects.filter(state=Job.State.RUNNING).exists() and time.monotonic() < deadline:
        time.sleep(0.2)


def wait_for_job(
    pk: int, until: Callable[[Job], bool] | None = None, timeout_s: float = JOB_TIMEOUT_S
) -> Job:
    """Poll job `pk` until `until(job)` (default: a final state); fail on timeout."""
    until = until or (lambda job: job.is_final)
    deadline = time.monotonic() + timeout_s
    while True:
        job = Job.objects.get(pk=pk)
        if until(job):
            return job
        if time.monotonic() > deadline:
            pytest.fail(
                f"job {pk} still {job.state} ({job.phase}: {job.message}) after {timeout_s} s"
            )
        time.sleep(0.1)
