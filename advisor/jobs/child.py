"""Run one profile in a fresh child process and watch it.

The contract with the library: `python -m profiling job --spec S --out R`
prints `{"event": "progress", ...}` lines on stdout, writes `Profile.to_dict()`
(exit 0) or `{"error": {"kind", "message"}}` (exit 2/3/4) to R. The child has
its own process group, so one kill stops it and anything it started, and it
dies with the worker process (PR_SET_PDEATHSIG) if Celery kills that.
This module imports neither Django nor torch.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

POLL_S = 0.2
# Progress is written to the row at most this often; beats fill the gaps.
MIN_PROGRESS_INTERVAL_S = 0.5
ERROR_KINDS = {
    "bad_model": "bad model",
    "remote_code": "remote code refused",
    "not_allowed": "not allowed",
    "config": "bad config",
    "bad_config": "bad config",
    "out_of_memory": "out of memory",
    "device": "device unavailable",
    "internal": "internal error",
}


@dataclass(frozen=True)
class Progress:
    phase: str
    fraction: float
    message: str


@dataclass
class Outcome:
    """How a run ended: SUCCEEDED with a result, FAILED with a reason, or STOPPED."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"  # the watcher asked to stop (cancel, or the claim was lost)

    status: str
    result: dict[str, Any] | None = None
    error: str = ""

    @classmethod
    def failed(cls, error: str) -> Outcome:
        return cls(cls.FAILED, error=error)


# Called on every beat (None) and on progress; returning False stops the run.
Watch = Callable[[Progress | None], bool]


@dataclass
class Run:
    """What a run needs besides the spec: where, how long, whom to tell."""

    workdir: Path
    time_limit_s: float
    tick_s: float
    watch: Watch
    on_start: Callable[[int], None] = lambda pid: None
    env: Mapping[str, str] = field(default_factory=dict)


def run(spec: dict[str, Any], how: Run) -> Outcome:
    """Run the profile for `spec` to the end, a stop, or the deadline."""
    spec_path, out_path = how.workdir / "spec.json", how.workdir / "result.json"
    spec_path.write_text(json.dumps(spec))
    argv = [
        sys.executable,
        "-m",
        "profiling",
        "job",
        "--spec",
        str(spec_path),
        "--out",
        str(out_path),
    ]
    child = Child.start(argv, how.workdir, how.env)
    try:
        how.on_start(child.pid)
        stopped = supervise(child, how)
        if stopped is not None:
            return stopped
        return outcome_of(child.returncode, out_path, child.stderr_tail())
    finally:
        child.kill()


def supervise(child: Child, how: Run) -> Outcome | None:
    """Beat and relay progress until the child exits (None) or must stop (an Outcome)."""
    deadline = time.monotonic() + how.time_limit_s
    next_beat = last_write = 0.0
    latest: Progress | None = None
    while child.wait(POLL_S) is None:
        latest = child.latest_progress() or latest
        now = time.monotonic()
        if now >= deadline:
            return Outcome.failed(f"timed out after {how.time_limit_s:g} s")
        fresh = latest is not None and now - last_write >= MIN_PROGRESS_INTERVAL_S
        if fresh or now >= next_beat:
            if not how.watch(latest):
                return Outcome(Outcome.STOPPED)
            latest, last_write, next_beat = None, now, now + how.tick_s
    return None


def outcome_of(returncode: int | None, out_path: Path, stderr_tail: str) -> Outcome:
    """Turn the child's exit status and result file into an Outcome."""
    data = _read_json(out_path)
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return Outcome.failed(error_message(data["error"]))
    if returncode == 0 and isinstance(data, dict):
        return Outcome(Outcome.SUCCEEDED, result=data)
    if returncode is not None and returncode < 0:
        return Outcome.failed(killed_message(-returncode))
    if returncode == 0:
        return Outcome.failed("the profiler exited without writing a result")
    tail = f": {stderr_tail}" if stderr_tail else ""
    return Outcome.failed(f"the profiler exited with status {returncode}{tail}")


def error_message(error: dict[str, Any]) -> str:
    kind = str(error.get("kind") or "internal")
    label = ERROR_KINDS.get(kind, kind.replace("_", " "))
    return f"{label}: {error.get('message') or 'no details given'}"


def killed_message(signum: int) -> str:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = "unknown"
    text = f"killed by signal {signum} ({name})"
    if signum == signal.SIGKILL:
        text += " — the system may have run out of memory"
    return text


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class Child:
    """A child process in its own session, with a thread reading its progress."""

    def __init__(self, proc: subprocess.Popen, stderr_path: Path) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.stderr_path = stderr_path
        self.events: queue.SimpleQueue[Progress] = queue.SimpleQueue()
        self.reader = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self.reader.start()

    @classmethod
    def start(cls, argv: list[str], workdir: Path, env: Mapping[str, str]) -> Child:
        stderr_path = workdir / "stderr.log"
        with open(stderr_path, "wb") as stderr:
            proc = subprocess.Popen(
                argv,
                cwd=workdir,
                env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,  # a file, not a pipe: a chatty child can never block on it
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        return cls(proc, stderr_path)

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def wait(self, timeout_s: float) -> int | None:
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def latest_progress(self) -> Progress | None:
        latest = None
        while not self.events.empty():
            latest = self.events.get_nowait()
        return latest

    def kill(self) -> None:
        """SIGKILL the whole process group (a no-op once it is gone) and reap."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait()
        self.reader.join(timeout=5)

    def stderr_tail(self, lines: int = 3, chars: int = 500) -> str:
        """The last few lines of stderr, without traceback frames."""
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        kept = [ln for ln in text.splitlines() if ln.strip() and _is_message_line(ln)]
        return " | ".join(kept[-lines:])[-chars:]

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            event = parse_progress(raw)
            if event is not None:
                self.events.put(event)
        stream.close()


def parse_progress(raw: bytes | str) -> Progress | None:
    """A progress event from one stdout line; anything else is ignored."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("event") != "progress":
        return None
    try:
        fraction = min(1.0, max(0.0, float(data.get("fraction") or 0.0)))
    except (TypeError, ValueError):
        fraction = 0.0
    return Progress(
        str(data.get("phase") or "")[:64], fraction, str(data.get("message") or "")[:500]
    )


def _is_message_line(line: str) -> bool:
    return not line.startswith((" ", "\t", "Traceback (most recent call last)"))


# Loaded here, not after fork: importing in a forked child can deadlock.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: get SIGKILL when the worker process dies."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
