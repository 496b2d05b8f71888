"""Find the processes a test started, and only those.

A test hands its children an environment carrying a tag of its own; every process they
start inherits it, even one that outlives its parent and is re-parented to init. A
search by command line (`pgrep -f`) would also find another run's processes on the
same machine.
"""

from __future__ import annotations

import contextlib
import os
import uuid

import psutil

TAG_ENV = "ADVISOR_TEST_PROCESS_TAG"


def tagged_environment() -> tuple[str, dict[str, str]]:
    """A new tag, and our environment with it set."""
    tag = uuid.uuid4().hex
    return tag, {**os.environ, TAG_ENV: tag}


def alive_with_tag(tag: str) -> list[str]:
    """The command lines of the live processes whose environment carries `tag`."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(TAG_ENV) == tag:
                found.append(" ".join(proc.info["cmdline"] or []))
    return found
