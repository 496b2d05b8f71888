"""A worker host cut off mid-job, for real: a network namespace of its own joined to this
machine by a veth pair, its own redis-server and PostgreSQL cluster listening on this side
of the pair, one worker inside the namespace and one outside.

The link is cut without a reset: both ends are told the other's hardware address is one
nobody has, so every packet leaves and is silently dropped on arrival, as on a switch that
died or a firewall that drops. (Taking the link down, by contrast, gives the senders
errors at once.) The namespaced worker's job is held mid-run at a gate when the cut comes;
the cut lasts `CUT_S`, three stale limits by default. Then:

- the job is reaped and finished by the worker on this side;
- the cut-off attempt writes nothing once the link is back: a trigger in the cluster
  records, with the client's address, every update of the job's row;
- the cut-off worker takes and finishes a new job within `SERVE_AGAIN_S` of the link's
  return.

It prints one `partition …` line of figures; `python bench/partition.py` runs it at the
default stale limit and with a 20-minute cut. Skipped, with why, where this machine cannot
make namespaces or has no PostgreSQL server to run.
"""

from __future__ import annotations

import ipaddress
import json
import os
import pwd
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest
from psycopg.rows import dict_row

from advisor import embedded_redis
from tests.conftest import JOB_TIMEOUT_S, ROOT, TEST_WORKER_ENV, WorkerProcess, worker_argv
from tests.gate import Gate
from tests.polling import until

pytestmark = [pytest.mark.slow, pytest.mark.worker]

# A short stale limit keeps the suite's run near a minute and a half; the bench sets the
# default (120 s) and the cut's length through these.
STALE_S = int(os.environ.get("ADVISOR_PARTITION_STALE_S", "8"))
CUT_S = float(os.environ.get("ADVISOR_PARTITION_CUT_S", str(3 * STALE_S)))
# The promise: back to serving within a minute of the link's return, whatever the cut.
SERVE_AGAIN_S = 60
# Heartbeat and reaper period in the defaults' proportions (5 s and 30 s to 120 s).
PARTITION_ENV = {
    "ADVISOR_HEARTBEAT_STALE_S": str(STALE_S),
    "ADVISOR_HEARTBEAT_S": str(max(1, STALE_S // 24)),
    "ADVISOR_REAP_EVERY_S": str(max(1, STALE_S // 4)),
}
TINY = {"prompt_tokens": 32, "output_tokens": 8, "concurrency": 2}
# Locally administered and unicast: no interface has it, so a frame sent to it is dropped.
NOBODY_MAC = "02:00:00:00:00:01"
PG_CTL = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass
class Link:
    """A veth pair between this machine (`host_ip`) and namespace `ns` (`ns_ip`)."""

    ns: str
    host_dev: str
    ns_dev: str
    host_ip: str
    ns_ip: str
    host_mac: str = ""
    ns_mac: str = ""

    def cut(self) -> None:
        self._point(NOBODY_MAC, NOBODY_MAC)

    def restore(self) -> None:
        self._point(self.ns_mac, self.host_mac)

    def _point(self, to_ns: str, to_host: str) -> None:
        # Permanent entries: no ARP exchange can repair (or reveal) the cut.
        _ip("neigh", "replace", self.ns_ip, "lladdr", to_ns, "nud", "permanent",
            "dev", self.host_dev)  # fmt: skip
        _ip("-n", self.ns, "neigh", "replace", self.host_ip, "lladdr", to_host,
            "nud", "permanent", "dev", self.ns_dev)  # fmt: skip


def _unused_block() -> tuple[str, str]:
    """Two addresses of a /30 in 10.251.0.0/16 that no interface of this machine uses."""
    taken = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout
    while True:
        third, fourth = random.randrange(256), 4 * random.randrange(64)
        if f"10.251.{third}." not in taken:
            return f"10.251.{third}.{fourth + 1}", f"10.251.{third}.{fourth + 2}"


@pytest.fixture
def link() -> Iterator[Link]:
    if os.geteuid() != 0:
        pytest.skip("making a network namespace and a veth pair needs root")
    if not shutil.which("ip"):
        pytest.skip("no `ip` command (iproute2) to make a network namespace")
    suffix = uuid.uuid4().hex[:8]
    host_ip, ns_ip = _unused_block()
    found = Link(f"advisor-{suffix}", f"av{suffix}h", f"av{suffix}n", host_ip, ns_ip)
    try:
        _ip("netns", "add", found.ns)
    except RuntimeError as exc:
        pytest.skip(f"this machine cannot make a network namespace: {exc}")
    try:
        try:
            _ip("link", "add", found.host_dev, "type", "veth", "peer", "name", found.ns_dev,
                "netns", found.ns)  # fmt: skip
        except RuntimeError as exc:
            pytest.skip(f"this machine cannot make a veth pair: {exc}")
        _ip("addr", "add", f"{host_ip}/30", "dev", found.host_dev)
        _ip("link", "set", found.host_dev, "up")
        _ip("-n", found.ns, "addr", "add", f"{ns_ip}/30", "dev", found.ns_dev)
        _ip("-n", found.ns, "link", "set", found.ns_dev, "up")
        _ip("-n", found.ns, "link", "set", "lo", "up")
        found.host_mac = Path(f"/sys/class/net/{found.host_dev}/address").read_text().strip()
        found.ns_mac = subprocess.run(
            ["ip", "netns", "exec", found.ns, "cat", f"/sys/class/net/{found.ns_dev}/address"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        found.restore()
        yield found
    finally:
        subprocess.run(["ip", "link", "del", found.host_dev], capture_output=True)
        subprocess.run(["ip", "netns", "del", found.ns], capture_output=True)


@pytest.fixture
def redis_on(link: Link) -> Iterator[str]:
    """A redis-server of this test's own, on this side of the link."""
    port = _free_port(link.host_ip)
    server = subprocess.Popen(
        [embedded_redis.executable(), "--port", str(port), "--bind", link.host_ip,
         "--save", "", "--appendonly", "no", "--protected-mode", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert until(lambda: _answers(link.host_ip, port) or server.poll() is not None, 10)
        assert server.poll() is None, "redis-server did not start"
        yield f"redis://{link.host_ip}:{port}/0"
    finally:
        server.terminate()
        server.wait(10)


def _free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


def _answers(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False


def _as_postgres(argv: list[str]) -> None:
    done = subprocess.run(["runuser", "-u", "postgres", "--", *argv],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def database_on(link: Link) -> Iterator[str]:
    """A PostgreSQL cluster of this test's own listening on this side of the link, open to
    both ends of it; its URL."""
    if not PG_CTL:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql")
    try:
        owner = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user to run a cluster as")
    if not shutil.which("runuser"):
        pytest.skip("starting a cluster as the postgres user needs runuser")
    home = Path(tempfile.mkdtemp(prefix="advisor-pg-", dir="/tmp"))
    data, port = home / "data", _free_port(link.host_ip)
    try:
        os.chown(home, owner.pw_uid, owner.pw_gid)
        _as_postgres([str(PG_CTL[-1].parent / "initdb"), "-D", str(data), "-A", "trust",
                      "-U", "postgres", "--no-sync"])  # fmt: skip
        pair = ipaddress.ip_interface(f"{link.host_ip}/30").network
        with open(data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {pair} trust\n")
        options = f"-p {port} -k {home} -c listen_addresses={link.host_ip} -c fsync=off"
        _as_postgres([str(PG_CTL[-1]), "-D", str(data), "-w", "-t", "60", "-o", options,
                      "-l", str(home / "log"), "start"])  # fmt: skip
        yield f"postgres://postgres@{link.host_ip}:{port}/postgres"
    finally:
        subprocess.run(["runuser", "-u", "postgres", "--", str(PG_CTL[-1]), "-D", str(data),
                        "-m", "immediate", "stop"], capture_output=True)  # fmt: skip
        shutil.rmtree(home, ignore_errors=True)


# Every update of a job row, with the address of the client that made it: the cut-off
# worker is the only client at the namespace's address.
AUDIT = """
CREATE TABLE partition_audit (
    id bigserial PRIMARY KEY, job_id bigint, client inet, state text, lease text,
    at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION partition_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO partition_audit (job_id, client, state, lease)
    VALUES (NEW.id, inet_client_addr(), NEW.state, NEW.lease);
    RETURN NEW;
END $$;
CREATE TRIGGER partition_audit AFTER UPDATE ON jobs_job
    FOR EACH ROW EXECUTE FUNCTION partition_audit();
"""
SUBMIT = """
import json, sys, django
django.setup()
from advisor.jobs import dispatch
fields = json.loads(sys.argv[2])
print(dispatch.submit(queue=sys.argv[1], model_source="demo", model_name="demo", **fields).pk)
"""


@dataclass
class Fleet:
    """The two hosts' shared Redis and database, and the workers started on them."""

    link: Link
    env: dict[str, str]
    logs: Path
    db: psycopg.Connection[dict[str, Any]]
    started: list[WorkerProcess]

    def worker(self, queues: list[str], extra: dict[str, str], cut_off: bool) -> WorkerProcess:
        """A worker on `queues`: in the namespace if `cut_off`, on this side otherwise."""
        name = f"{'cut' if cut_off else 'host'}-{uuid.uuid4().hex[:6]}@%h"
        argv = worker_argv(queues, name)
        if cut_off:
            argv = ["ip", "netns", "exec", self.link.ns, *argv]
        log_path = self.logs / f"{name.split('@')[0]}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(argv, cwd=ROOT, env={**self.env, **extra}, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        worker = WorkerProcess(name, queues, proc, log_path)
        self.started.append(worker)
        # Announced: its row names it in full (%h is this machine's name, in both hosts).
        pattern = name.split("@")[0] + "@%"
        row = None

        def announced() -> bool:
            nonlocal row
            row = self.one("SELECT name FROM jobs_worker WHERE name LIKE %s", pattern)
            return row is not None or not worker.alive()

        assert until(announced, 90, every_s=0.2) and row is not None, worker.log_tail()
        worker.name = row["name"]
        return worker

    def submit(self, queue: str) -> int:
        done = subprocess.run([sys.executable, "-c", SUBMIT, queue, json.dumps(TINY)], cwd=ROOT,
                              env=self.env, capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return int(done.stdout.split()[-1])

    def one(self, sql: str, *args: Any) -> dict[str, Any] | None:
        return self.db.execute(sql, args).fetchone()

    def job(self, pk: int) -> dict[str, Any]:
        found = self.one("SELECT * FROM jobs_job WHERE id = %s", pk)
        assert found is not None
        return found

    def wait_job(self, pk: int, check: Callable[[dict[str, Any]], bool], timeout_s: float) -> float:
        """Poll job `pk` until `check(row)`; the monotonic time it was seen to hold."""
        assert until(lambda: check(self.job(pk)), timeout_s, every_s=0.1), self.job(pk)
        return time.monotonic()


@pytest.fixture
def fleet(
    link: Link, redis_on: str, database_on: str, demo_model_dir: Path, tmp_path: Path
) -> Iterator[Fleet]:
    env = {**os.environ, **TEST_WORKER_ENV, **PARTITION_ENV, "CELERY_BROKER_URL": redis_on,
           "DATABASE_URL": database_on, "DJANGO_SETTINGS_MODULE": "advisor.settings"}  # fmt: skip
    for name in ("ADVISOR_DB_NAME", "ADVISOR_TEST_DB_NAME", "REDIS_URL", "ADVISOR_CACHE_URL"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    started: list[WorkerProcess] = []
    with psycopg.connect(database_on.replace("postgres://", "postgresql://"),
                         autocommit=True, row_factory=dict_row) as db:  # fmt: skip
        db.execute(AUDIT)
        found = Fleet(link, env, tmp_path, db, started)
        try:
            yield found
        finally:
            link.restore()  # a failure mid-cut must not leave a worker unable to stop
            for worker in started:
                worker.stop()


def writes_from_cut_off_host(fleet: Fleet, pk: int, after_id: int, up_to_id: int) -> int:
    """Updates of job `pk` made from the namespace's address, audit rows (after_id, up_to_id]."""
    found = fleet.one(
        "SELECT count(*) AS n FROM partition_audit "
        "WHERE job_id = %s AND id > %s AND id <= %s AND client = %s",
        pk, after_id, up_to_id, fleet.link.ns_ip,
    )  # fmt: skip
    assert found is not None
    return int(found["n"])


def child_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_worker_cut_off_mid_job_loses_it_writes_nothing_and_serves_again(
    fleet: Fleet, tmp_path: Path
) -> None:
    gate = Gate(tmp_path / "gate")
    cut_off = fleet.worker(["partition", "partition-cut"], gate.env(), cut_off=True)
    pk = fleet.submit("partition")
    fleet.wait_job(pk, lambda j: j["state"] == "running" and j["worker_host"] == cut_off.name,
                   JOB_TIMEOUT_S)  # fmt: skip
    rescuer = fleet.worker(["partition"], {}, cut_off=False)  # while the first job loads
    fleet.wait_job(pk, lambda j: gate.held_at(j["child_pid"]) is not None, JOB_TIMEOUT_S)
    first = fleet.job(pk)
    mark = fleet.one("SELECT coalesce(max(id), 0) AS id FROM partition_audit")
    assert mark is not None

    fleet.link.cut()
    cut_at = time.monotonic()
    reaped_at = fleet.wait_job(pk, lambda j: j["lease"] != first["lease"], CUT_S)
    # Queued for the cut-off worker alone: it takes it only once it serves again.
    second = fleet.submit("partition-cut")
    time.sleep(max(0.0, cut_at + CUT_S - time.monotonic()))
    fleet.link.restore()
    back_at = time.monotonic()

    # Waited for past the bound, so a slow return is measured and printed, then failed.
    served_at = fleet.wait_job(second, lambda j: j["worker_host"] == cut_off.name,
                               SERVE_AGAIN_S + 300)  # fmt: skip
    # The cut-off attempt learns at its first beat that the job is not its own any more.
    assert until(lambda: child_gone(first["child_pid"]), 60), "the cut-off attempt's child lives"
    refused = re.compile(rf"job {pk}: \w+ \(not written")
    assert until(lambda: refused.search(cut_off.log_path.read_text(errors="replace")), 30), (
        cut_off.log_tail()
    )
    gate.open()
    fleet.wait_job(second, lambda j: j["state"] in ("succeeded", "failed"), JOB_TIMEOUT_S)
    fleet.wait_job(pk, lambda j: j["state"] in ("succeeded", "failed"), JOB_TIMEOUT_S)
    final, again = fleet.job(pk), fleet.job(second)
    last = fleet.one("SELECT max(id) AS id FROM partition_audit")
    assert last is not None
    written = writes_from_cut_off_host(fleet, pk, mark["id"], last["id"])
    # The audit does see that host: its claim and beats before the cut are there.
    assert writes_from_cut_off_host(fleet, pk, 0, mark["id"]) >= 2
    print(
        f"partition: stale_s={STALE_S} cut_s={back_at - cut_at:.0f} "
        f"reaped_after_s={reaped_at - cut_at:.1f} "
        f"finished_by={'host' if final['worker_host'] == rescuer.name else final['worker_host']} "
        f"state={final['state']} attempts={final['attempts']} stale_writes={written} "
        f"serving_again_after_s={served_at - back_at:.1f} new_job={again['state']}"
    )
    assert served_at - back_at <= SERVE_AGAIN_S
    assert final["state"] == "succeeded", final["error"]
    assert final["worker_host"] == rescuer.name and final["attempts"] == 2
    assert written == 0
    assert again["state"] == "succeeded", again["error"]
    assert again["worker_host"] == cut_off.name
    # Beats that meet the cut say so in one line each, not a traceback every few seconds.
    assert "could not announce\nTraceback" not in cut_off.log_path.read_text(errors="replace")
