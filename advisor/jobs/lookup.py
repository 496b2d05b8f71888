"""A job by its share token, from a bare token or a pasted share link.

The share token is the only key to a job: pages, the API, comments and the
compare page all look a job up through here, so a malformed token never
reaches the database (PostgreSQL rejects a NUL byte).
"""

from __future__ import annotations

import re

from advisor.jobs.models import Job

SHARE_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,32}")
# The token inside a pasted share link: ".../jobs/<token>/" with any host or prefix.
SHARE_LINK = re.compile(r"(?:^|/)jobs/([A-Za-z0-9_-]{1,32})(?:[/?#]|$)")


def find_job(token: str) -> Job | None:
    """The job with this share token, or None (also for a malformed token)."""
    if not SHARE_TOKEN.fullmatch(token):
        return None
    return Job.objects.filter(share_token=token).first()


def token_from_text(text: str) -> str | None:
    """The share token in a pasted share link or bare token; None if there is none."""
    text = text.strip()
    if SHARE_TOKEN.fullmatch(text):
        return text
    match = SHARE_LINK.search(text)
    return match.group(1) if match else None
