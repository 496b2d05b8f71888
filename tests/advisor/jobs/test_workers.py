"""The worker's announcer and the prefork pool: forks never split a transaction."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from advisor.jobs import workers


def _connect(path: Path, timeout_s: float = 5) -> sqlite3.Connection:
    return sqlite3.connect(path, timeout=timeout_s, isolation_level=None)


def _write_in_child(path: Path) -> int:
    """Exit status of a forked child that writes one row after its parent's beat ended."""
    pid = os.fork()
    if pid == 0:  # the child: what a fresh pool process does with its first task
        code = 1
        try:
            time.sleep(0.3)
            conn = _connect(path, timeout_s=2)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (2)")
            conn.execute("COMMIT")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_fork_during_a_beat_waits_so_the_child_can_still_write(tmp_path):
    # Without the guard the child inherits SQLite's lock state from the open
    # transaction and sees "database is locked" forever (seen in CI as a job
    # stuck QUEUED while its task timed out on the claim).
    path = tmp_path / "db.sqlite3"
    setup = _connect(path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE t (x)")
    setup.close()
    workers.guard_forks()
    in_transaction = threading.Event()

    def beat() -> None:  # as Announcer.beat does: the write under _quiet_db
        with workers._quiet_db:
            conn = _connect(path)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (1)")
            in_transaction.set()
            time.sleep(0.3)
            conn.execute("COMMIT")
            conn.close()

    thread = threading.Thread(target=beat)
    thread.start()
    assert in_transaction.wait(5)
    assert _write_in_child(path) == 0
    thread.join()
    rows = _connect(path).execute("SELECT x FROM t ORDER BY x").fetchall()
    assert rows == [(1,), (2,)]


def _runlocal_worker_name() -> str:
    """The worker name a fresh `manage.py runlocal` process gives its worker."""
    import subprocess
    import sys

    code = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'advisor.settings'); "
        "django.setup(); from advisor.jobs.management.commands.runlocal import worker_argv; "
        "argv = worker_argv(); print(argv[argv.index('-n') + 1])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    )
    return done.stdout.strip().splitlines()[-1].replace("%h", "host")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_runlocal_workers_on_one_machine_keep_their_own_rows():
    from advisor.jobs.models import Worker

    first, second = _runlocal_worker_name(), _runlocal_worker_name()
    assert first != second
    announcers = [workers.Announcer(name, ["cpu", "default"], 60) for name in (first, second)]
    for announcer in announcers:
        announcer.beat()
    announcers[1].stop()  # the second run-local stops: the first's worker stays live
    live = Worker.objects.live().filter(name__in=[first, second])
    assert list(live.values_list("name", flat=True)) == [first]
