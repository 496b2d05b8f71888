"""Which GPUs a job's child may use: a lease over the worker's declared devices.

A worker declares its GPUs with `ADVISOR_WORKER_GPUS`: CUDA indices ("0,1,2,3"),
"auto" (every CUDA device the device probe finds; the default) or "" (none: a
CPU worker). Each job's child gets the devices it needs and sees only those
(`CUDA_VISIBLE_DEVICES`), so two jobs on one machine never share a GPU and a
job never lands on GPU 0 by default.

A lease is a set of lock files, `<VAR_DIR>/gpus/<index>.lock`, each held with
an exclusive `flock` for as long as the job runs: the kernel releases them
when the holder exits, however it exits (a SIGKILLed worker leaves nothing to
clean up), and every worker process on the host sees the same locks. A job
that finds too few free devices waits for them, beating as it waits.
"""

from __future__ import annotations

import fcntl
import glob
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


class NoDevices(Exception):
    """The job cannot have the GPUs it needs here; the message says why."""


PROBE_TIMEOUT_S = 120
POLL_S = 1.0
_probed: list[int] | None = None


def declared(setting: str) -> list[int]:
    """The worker's GPU indices from its setting ("0,1", "auto" or "")."""
    setting = setting.strip()
    if setting == "auto":
        return probed()
    try:
        indices = [int(part) for part in setting.split(",") if part.strip()]
    except ValueError:
        raise ValueError(
            f"ADVISOR_WORKER_GPUS={setting!r}: CUDA indices separated by commas, 'auto' or ''"
        ) from None
    if any(i < 0 for i in indices) or len(set(indices)) != len(indices):
        raise ValueError(f"ADVISOR_WORKER_GPUS={setting!r}: distinct indices from 0")
    return indices


def probed() -> list[int]:
    """The CUDA devices the library sees from this worker (asked once per process, in a
    child: the worker never imports torch)."""
    global _probed
    if _probed is None and not glob.glob("/dev/nvidia[0-9]*"):
        _probed = []  # no NVIDIA device nodes: no CUDA device, without starting torch
    if _probed is None:
        argv = [sys.executable, "-m", "profiling", "devices"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
            found = json.loads(done.stdout) if done.returncode == 0 else []
        except (OSError, ValueError, subprocess.TimeoutExpired):
            found = []
        names = [d.get("device", "") for d in found if isinstance(d, dict)]
        _probed = [int(n.split(":")[1]) for n in names if n.startswith("cuda:")]
    return list(_probed)


def needed(config: Any, available: int) -> int:
    """Devices one job uses: the measured tensor-parallel size when asked (by default two
    when the parallel experiment runs and the worker has two), else one."""
    if available == 0:
        return 0
    asked = config.tp_measure
    if asked is None and "parallel" in config.experiments:
        asked = 2 if available >= 2 else 0
    return max(1, asked or 0)


@contextmanager
def lease(
    devices: list[int],
    count: int,
    folder: Path,
    on_wait: Callable[[str], bool] = lambda message: True,
    timeout_s: float | None = None,
) -> Iterator[list[int]]:
    """Hold `count` of `devices` for the block; yields their indices ([] for count 0).

    Waits while others hold them, calling `on_wait(message)` about every second;
    gives up with NoDevices when it returns False (the job was cancelled or lost
    its lease) or `timeout_s` passes, and at once when the worker has too few.
    """
    if count == 0:
        yield []
        return
    if count > len(devices):
        raise NoDevices(
            f"this job needs {count} GPUs and the worker has {len(devices)} "
            "(ADVISOR_WORKER_GPUS): ask for fewer (tp_measure) or send it to a bigger worker"
        )
    folder.mkdir(parents=True, exist_ok=True)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        held = _try(devices, count, folder)
        if held is not None:
            break
        busy = f"waiting for {count} free GPU{'s' * (count > 1)} of {len(devices)}"
        if not on_wait(busy):
            raise NoDevices(f"stopped while {busy}")
        if deadline is not None and time.monotonic() > deadline:
            raise NoDevices(f"gave up after {timeout_s:.0f} s {busy}")
        time.sleep(POLL_S)
    try:
        yield sorted(held)
    finally:
        for handle in held.values():
            handle.close()  # closing the descriptor releases its flock


def _try(devices: list[int], count: int, folder: Path) -> dict[int, IO[bytes]] | None:
    held: dict[int, IO[bytes]] = {}
    for index in devices:
        handle = open(folder / f"{index}.lock", "ab")  # noqa: SIM115 - held for the job
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        held[index] = handle
        if len(held) == count:
            return held
    for handle in held.values():
        handle.close()
    return None


def visible(indices: list[int]) -> dict[str, str]:
    """The child's environment for its devices: only those, in order."""
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in indices)} if indices else {}
