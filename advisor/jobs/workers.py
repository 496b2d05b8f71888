"""A Celery worker announces itself: a Worker row with host, queues, devices.

When the worker is ready, a daemon thread in its main process upserts the
row every ADVISOR_WORKER_HEARTBEAT_S and runs the reaper when it is due (a
lock in the shared cache lets one process of the fleet do it per period);
the row is deleted on shutdown. The
devices come from `python -m profiling devices` in a child process,
so the worker itself never imports torch or initialises CUDA.

The prefork pool forks a fresh child per task from this same process. A fork
taken while the announcer is inside a write transaction copies SQLite's
in-process lock state into the child, which then finds the database locked
for good ("database is locked" on its first write). So forks wait for the
beat in progress: `_quiet_db` is held for each beat and taken around fork().
"""

from __future__ import annotations

import json
import logging
import os
import platform
import socket
import subprocess
import sys
import threading
from typing import Any

from celery import signals
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection
from django.utils import timezone

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 120
_announcer: Announcer | None = None
_quiet_db = threading.Lock()
_fork_guarded = False


def guard_forks() -> None:
    """Make every later fork() of this process wait for a beat in progress (once)."""
    global _fork_guarded
    if not _fork_guarded:
        os.register_at_fork(
            before=_quiet_db.acquire,
            after_in_parent=_quiet_db.release,
            after_in_child=_quiet_db.release,
        )
        _fork_guarded = True


def probe_devices() -> list[dict[str, Any]]:
    """This machine's devices as the library sees them, CPU-only if that fails."""
    argv = [sys.executable, "-m", "profiling", "devices"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        devices = _parse_devices(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        devices = None
    if not devices:
        log.warning("device probe failed; announcing the CPU only")
        return [cpu_device()]
    return devices


def probe_engines(devices: list[dict[str, Any]]) -> dict[str, str]:
    """The serving engines this worker can measure on, with their versions ({} if none).
    An engine whose benchmark client dies on this machine's CPU is not offered."""
    from profiling.engine import ENGINES

    device = engine_device(devices)
    found = {}
    for name, engine in ENGINES.items():
        version = engine.version(device=device)
        if not version:
            continue
        if unusable := engine.client_unusable(device=device, version_found=version):
            log.warning("%s %s not offered: %s", name, version, unusable)
            continue
        found[name] = version
    return found


def engine_device(devices: list[dict[str, Any]]) -> str:
    """The device this worker's engine serves on: its GPUs when it has any."""
    return "cuda" if any(d.get("device", "cpu") != "cpu" for d in devices) else "cpu"


def _parse_devices(stdout: str) -> list[dict[str, Any]] | None:
    try:
        data = json.loads(stdout)
    except ValueError:
        return None
    if isinstance(data, dict):
        data = data.get("devices")
    if isinstance(data, list) and all(isinstance(d, dict) and "device" in d for d in data):
        return data
    return None


def cpu_device() -> dict[str, Any]:
    return {
        "device": "cpu",
        "name": platform.processor() or "CPU",
        "memory_bytes": None,
        "gpu_kind": None,
    }


class Announcer(threading.Thread):
    """Keeps this worker's row fresh until stopped; then removes it."""

    def __init__(self, name: str, queues: list[str], interval_s: float) -> None:
        super().__init__(name="advisor-announcer", daemon=True)
        self.worker_name, self.queues, self.interval_s = name, queues, interval_s
        self.devices: list[dict[str, Any]] = []
        self.engines: dict[str, str] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        # The row appears and the reaper runs at once; devices follow when probed
        # (importing torch in the probe can take a minute on a busy machine).
        threading.Thread(target=self.probe, name="advisor-device-probe", daemon=True).start()
        while not self.stopped.is_set():
            self.beat()
            self.reap()
            self.stopped.wait(self.interval_s)

    def probe(self) -> None:
        self.devices = probe_devices()
        self.engines = probe_engines(self.devices)

    def beat(self) -> None:
        from advisor.jobs.models import Worker

        with _quiet_db:  # no fork while the transaction is open (see the module doc)
            try:
                close_old_connections()
                Worker.objects.update_or_create(
                    name=self.worker_name,
                    defaults={
                        "host": socket.gethostname(),
                        "queues": Worker.wrap_queues(self.queues),
                        "devices": self.devices,
                        "engines": self.engines,
                        "last_seen": timezone.now(),
                    },
                )
            except (OperationalError, InterfaceError) as exc:
                # An outage or a cut link fails every beat until it ends: one line each,
                # not a traceback every few seconds (20 minutes cut off wrote 600 KB).
                first = str(exc).strip().splitlines()[:1] or [type(exc).__name__]
                log.warning("worker %s: could not announce: %s", self.worker_name, first[0])
            except Exception:  # a database hiccup must not kill the thread
                log.exception("worker %s: could not announce", self.worker_name)
            finally:
                # No connection stays open in this thread while the pool forks.
                connection.close()

    def reap(self) -> None:
        """Run the reaper when it is due fleet-wide: here, not behind the job queue's backlog."""
        from advisor.jobs.reaper import reap_if_due

        with _quiet_db:
            try:
                close_old_connections()
                reap_if_due()
            finally:
                connection.close()

    def stop(self) -> None:
        from advisor.jobs.models import Worker

        self.stopped.set()
        if self.ident is not None:  # started
            self.join(timeout=5)
        Worker.objects.filter(name=self.worker_name).delete()


def consumer_queues(consumer: Any) -> list[str]:
    """The queue names this worker consumes (its -Q option)."""
    task_consumer = getattr(consumer, "task_consumer", None)
    if task_consumer is not None and task_consumer.queues:
        return [q.name for q in task_consumer.queues]
    return list(consumer.app.amqp.queues.consume_from or consumer.app.amqp.queues)


@signals.worker_ready.connect
def _announce(sender: Any, **_: Any) -> None:
    global _announcer
    guard_forks()
    _announcer = Announcer(
        sender.hostname, consumer_queues(sender), settings.ADVISOR_WORKER_HEARTBEAT_S
    )
    _announcer.start()
    log.info("worker %s: announced on queues %s", sender.hostname, ", ".join(_announcer.queues))


@signals.worker_shutdown.connect
def _withdraw(**_: Any) -> None:
    if _announcer is not None:
        try:
            _announcer.stop()
        except Exception:  # shutting down anyway; the row goes stale by itself
            log.exception("worker: could not remove its row")
