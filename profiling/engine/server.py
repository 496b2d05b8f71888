"""One engine server as a subprocess: start it, wait for health, read its counters, stop it.

    with Server(command, log_path, env, start_timeout_s=300) as server:
        server.url                       # http://127.0.0.1:<port>
        server.metrics()                 # the Prometheus counters, parsed

The server runs under `_guard.py` in a process group of its own, so stopping it
(or the job being killed) ends the server and every process it started. Its port
comes from the kernel (a free one, never shared by two jobs on one worker) and
a start that loses that port to another process is retried on a new one. A
server that exits or stays unhealthy past its timeout raises `EngineFailed`
with the reason read from its own log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from profiling.engine.metrics import Metrics, parse_metrics

GUARD = Path(__file__).with_name("_guard.py")
HOST = "127.0.0.1"
STOP_TIMEOUT_S = 30.0
PORT_RETRIES = 3


LOG_TAIL_LINES = 40


class EngineFailed(RuntimeError):
    """The engine did not start or did not finish: the message is its reason, and
    `logs` keeps the last lines of each log that says more ({"server": [...]})."""

    def __init__(self, reason: str, logs: dict[str, list[str]] | None = None) -> None:
        super().__init__(reason)
        self.logs = logs or {}


def tail(text: str, lines: int = LOG_TAIL_LINES) -> list[str]:
    return text.splitlines()[-lines:]


# What a signal that ended an engine process most often means there.
SIGNAL_MEANING = {
    "SIGILL": "illegal instruction: a binary built for a CPU feature this machine lacks",
    "SIGKILL": "killed outright: most often the kernel's out-of-memory killer",
    "SIGSEGV": "segmentation fault: a crash in native code",
    "SIGBUS": "bus error: a crash in native code, or shared memory ran out",
    "SIGABRT": "aborted by native code",
    "SIGTERM": "terminated from outside",
}


def signal_of(returncode: int | None) -> signal.Signals | None:
    """The signal that ended a process: negative from Popen, 128 + n from a shell
    or from our guard; None for an ordinary exit."""
    if returncode is None:
        return None
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    try:
        return signal.Signals(number) if number else None
    except ValueError:
        return None


def ended(returncode: int | None, log: str, reason: Callable[[str], str]) -> str:
    """Why a process of the engine's stopped: the signal by name and meaning when one
    ended it, then the reason its log gives; "no output" and the status for a silent one."""
    said = reason(log) if log.strip() else ""
    killed = signal_of(returncode)
    if killed is not None:
        meaning = SIGNAL_MEANING.get(killed.name, signal.strsignal(killed) or "")
        head = f"killed by {killed.name} ({meaning})"
        return f"{head}: {said}" if said else f"{head}; no output"
    status = "no exit status" if returncode is None else f"exit status {returncode}"
    return said or f"no output ({status})"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


class Server:
    """A running engine server; `command(port)` is its command line for a port."""

    def __init__(
        self,
        command: Callable[[int], list[str]],
        log_path: Path,
        env: dict[str, str],
        start_timeout_s: float,
        reason: Callable[[str], str],
    ) -> None:
        self._command = command
        self.log_path = log_path
        self._env = env
        self._timeout = start_timeout_s
        self._reason = reason
        self._process: subprocess.Popen | None = None
        self.port = 0
        self.start_seconds = 0.0

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> Server:
        for attempt in range(PORT_RETRIES):
            self.port = free_port()
            try:
                self._start_once()
                return self
            except EngineFailed as exc:
                if "address already in use" not in str(exc).lower() or attempt == PORT_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def _start_once(self) -> None:
        started = time.monotonic()
        self._status_path.unlink(missing_ok=True)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-I", str(GUARD), "--status", str(self._status_path), "--",
                 *self._command(self.port)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self._env, start_new_session=True,
            )  # fmt: skip
        while True:
            if self._process.poll() is not None:
                self.stop()
                code, text = self.exit_status(), self.log_text()
                raise EngineFailed(ended(code, text, self._reason), {"server": tail(text)})
            if self._healthy():
                self.start_seconds = time.monotonic() - started
                return
            if time.monotonic() - started > self._timeout:
                self.stop()
                text = self.log_text()
                raise EngineFailed(
                    f"the engine did not become healthy within {self._timeout:.0f} s"
                    + _last_words(self._reason(text) if text.strip() else ""),
                    {"server": tail(text)},
                )
            time.sleep(1.0)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def metrics(self) -> Metrics:
        return parse_metrics(self.metrics_text())

    def metrics_text(self) -> str:
        """The Prometheus text as served, labels and all."""
        try:
            with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
                return response.read().decode()
        except (urllib.error.URLError, OSError) as exc:
            raise EngineFailed(f"the server's /metrics could not be read: {exc}") from None

    @property
    def _status_path(self) -> Path:
        return self.log_path.with_name(self.log_path.name + ".status")

    def exit_status(self) -> int | None:
        """The server's own exit status as its guard saw it (128 + n for signal n);
        None when the guard could not say (it was killed itself)."""
        try:
            return int(self._status_path.read_text())
        except (OSError, ValueError):
            return None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """End the server and everything it started; safe to call twice."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=STOP_TIMEOUT_S)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        # The guard has ended its group; anything still there is killed outright.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def _last_words(reason: str) -> str:
    return f": {reason}" if reason else ""
