"""Waiting for an event in a test: poll a condition until a deadline, never a bare sleep."""

from __future__ import annotations

import time
from collections.abc import Callable


def until(condition: Callable[[], bool], timeout_s: float, every_s: float = 0.05) -> bool:
    """True as soon as `condition()` holds; False if it still does not after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
