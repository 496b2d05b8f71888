"""The rows of "Recent jobs", rendered once per job state.

A finished job's row never changes, so its HTML is kept in the shared cache,
keyed by the job, its state and finish time, whether the compare box is shown,
and the code's digest. A list of 30 finished jobs then costs one round trip to
Redis instead of 30 row renderings; rows of running jobs are rendered each
time, as their state moves.
"""

from __future__ import annotations

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from advisor import cache as shared_cache
from advisor.jobs.models import Job

ROW_CACHE_S = 24 * 3600
# What a row shows and is keyed by: a list of 30 loads nothing else.
ROW_FIELDS = (
    "share_token", "created_at", "origin", "model_name", "notes", "gpu_kind", "options",
    "state", "finished_at",
)  # fmt: skip


def _key(job: Job, compare: bool) -> str:
    finished = job.finished_at.timestamp() if job.finished_at else 0
    kept = f"{job.share_token}:{job.state}:{finished}:{int(compare)}"
    return f"advisor:job-row:{shared_cache.code_digest()}:{kept}"


def job_rows(jobs: list[Job]) -> list[SafeString]:
    """One `<tr>` per job, in order."""
    compare = len(jobs) > 1
    keys = {job.share_token: _key(job, compare) for job in jobs if job.is_final}
    kept = shared_cache.get_many(list(keys.values()))
    rows, fresh = [], {}
    for job in jobs:
        key = keys.get(job.share_token)
        html = kept.get(key) if key else None
        if not isinstance(html, str):
            html = render_to_string("jobs/_row.html", {"job": job, "compare": compare})
            if key:
                fresh[key] = html
        rows.append(mark_safe(html))  # rendered by our own template, above or earlier
    shared_cache.set_many(fresh, ROW_CACHE_S)
    return rows
