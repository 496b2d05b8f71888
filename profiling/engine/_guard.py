"""Keep an engine server from outliving the job that started it (standard library only).

    python _guard.py [--status FILE] -- <server command...>

Started as the leader of a new process group (`start_new_session`), it runs the
server in that group and ends the whole group when any of these happens: the
process that started it is gone (a job child killed with SIGKILL cannot clean
up, so its guard does), it receives SIGTERM or SIGINT, or the server exits.
Nothing of the engine stays behind or keeps listening on its port. The guard
ends with its group, so the server's own exit status (128 + n for a signal n,
as a shell reports it) is written to FILE first, for whoever started it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

POLL_S = 0.5
GRACE_S = 10.0


def _end_group(child: subprocess.Popen) -> None:
    group = os.getpgrp()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.1)
    # Whatever is left of the group (the server's own workers included) goes now.
    os.killpg(group, signal.SIGKILL)


def main(argv: list[str]) -> int:
    split = argv.index("--")
    command = argv[split + 1 :]
    status = argv[argv.index("--status") + 1] if "--status" in argv[:split] else None
    parent = os.getppid()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    child = subprocess.Popen(command)
    while not stop and child.poll() is None and os.getppid() == parent:
        time.sleep(POLL_S)
    code = child.poll()
    if code is not None and status:
        with open(status, "w") as out:
            out.write(str(128 - code if code < 0 else code))
    _end_group(child)
    return code if code is not None else 128 + signal.SIGTERM


if __name__ == "__main__":
    sys.exit(main(sys.argv))
