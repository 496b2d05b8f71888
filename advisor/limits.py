"""Rate limits that hold across every process: django-ratelimit's counters in the
shared Redis cache, keyed by the client's address and by the share link.

A limit answers 429 with Retry-After. `ADVISOR_CLIENT_IP_HEADER` names the
header a trusted reverse proxy sets to the client's address (its last entry
is the one the proxy appended); unset, the socket's address is the client's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest
from django_ratelimit.core import get_usage

log = logging.getLogger(__name__)


def client_address(request: HttpRequest) -> str:
    header = settings.ADVISOR_CLIENT_IP_HEADER
    if header:
        forwarded = request.headers.get(header, "")
        last = forwarded.split(",")[-1].strip()
        if last:
            return last[:64]
    return request.META.get("REMOTE_ADDR") or "unknown"


@dataclass(frozen=True)
class Limited:
    """Over a limit: which one, and the seconds until the window turns."""

    what: str
    retry_after_s: int

    def message(self) -> str:
        return f"Too many {self.what}: try again in {self.retry_after_s} s."


def over(request: HttpRequest, group: str, rate: str, key: str) -> int | None:
    """Count one hit of `group` for `key`; the seconds to wait when over `rate`, else None.

    A cache that cannot be reached counts nothing (the hit is let through and
    logged): the broker shares that Redis, so no job can be queued meanwhile.
    """
    if not rate:
        return None
    try:
        usage = get_usage(request, group=group, key=lambda _g, _r: key, rate=rate, increment=True)
    except Exception as exc:  # redis-py's connection errors, whatever its version
        log.warning("rate limit %s not counted: the shared cache is unreachable: %s", group, exc)
        return None
    if usage is None or not usage["should_limit"]:
        return None
    return max(1, int(usage["time_left"]))


def submission_limited(request: HttpRequest) -> Limited | None:
    """One more job submitted from this client: None, or the limit it is over."""
    wait = over(request, "submit", settings.ADVISOR_SUBMIT_RATE, client_address(request))
    return Limited("jobs submitted from your address", wait) if wait else None


def comment_limited(request: HttpRequest, share_token: str) -> Limited | None:
    """One more comment from this client on this thread: None, or the limit it is over."""
    address = client_address(request)
    wait = over(request, "comment", settings.ADVISOR_COMMENT_RATE, address)
    if wait:
        return Limited("comments from your address", wait)
    wait = over(request, "thread", settings.ADVISOR_THREAD_RATE, share_token)
    return Limited("comments on this report", wait) if wait else None
