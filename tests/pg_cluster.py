"""A PostgreSQL cluster of one's own: its own data directory and port under a temporary
directory, run as the `postgres` user (a cluster refuses to run as root), stopped and
removed at the end whatever happens.

Stopping it `immediate` is what a crash or a managed failover does to its clients: open
connections drop at once and new ones are refused until it is started again.
`tests/e2e/test_database_outage.py` and `bench/db_outage.py` use it; it imports neither
Django nor pytest, so a bench can run it alone.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BINARIES = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
OWNER = "postgres"


def unavailable() -> str:
    """Why no private cluster can be started on this machine; "" when one can."""
    if not BINARIES:
        return "no PostgreSQL server binaries under /usr/lib/postgresql"
    try:
        pwd.getpwnam(OWNER)
    except KeyError:
        return f"no {OWNER} user to run a cluster as"
    if os.geteuid() != 0 or not shutil.which("runuser"):
        return f"starting a cluster as the {OWNER} user needs root and runuser"
    return ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_owner(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", OWNER, "--", *argv], capture_output=True, text=True)


@dataclass
class Cluster:
    data: Path
    port: int

    def ctl(self, *args: str) -> None:
        """`pg_ctl` on this cluster, waiting for it to finish; raises if it fails."""
        sock = self.data.parent / "sock"
        command = [str(BINARIES[-1]), "-D", str(self.data), "-w", "-t", "60", *args]
        if args[0] == "start":
            options = f"-p {self.port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off"
            command += ["-o", options, "-l", str(self.data.parent / "log")]
        done = _as_owner(command)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl {' '.join(args)} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        self.ctl("start")

    def stop_immediate(self) -> None:
        """Stop as a crash does: no checkpoint, every connection dropped."""
        self.ctl("-m", "immediate", "stop")

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"


@contextmanager
def private_cluster() -> Iterator[Cluster]:
    """A fresh cluster, started; stopped and its directory removed on the way out."""
    why_not = unavailable()
    if why_not:
        raise RuntimeError(why_not)
    owner = pwd.getpwnam(OWNER)
    home = Path(tempfile.mkdtemp(prefix="advisor-pg-", dir="/tmp"))
    try:
        os.chown(home, owner.pw_uid, owner.pw_gid)
        (home / "sock").mkdir()
        os.chown(home / "sock", owner.pw_uid, owner.pw_gid)
        data = home / "data"
        initdb = BINARIES[-1].parent / "initdb"
        done = _as_owner([str(initdb), "-D", str(data), "-A", "trust", "-U", OWNER, "--no-sync"])
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr}")
        found = Cluster(data, free_port())
        found.start()
        yield found
    finally:
        # Whatever state it is in (up, stopped, never started): no server outlives us.
        _as_owner([str(BINARIES[-1]), "-D", str(home / "data"), "-m", "immediate", "stop"])
        shutil.rmtree(home, ignore_errors=True)
