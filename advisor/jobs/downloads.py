"""A job's downloads are named for it: "<what>-<model>-<token's first 8>.<ext>", so that
files saved from several reports stay apart (result.json, measurements.csv)."""

from __future__ import annotations

from django.http import HttpResponse
from django.utils.text import slugify

from advisor.jobs.models import Job


def attachment(response: HttpResponse, job: Job, what: str, ext: str) -> HttpResponse:
    """`response`, saved by a browser as `job`'s `what` file."""
    name = slugify(job.model_name.rsplit("/", 1)[-1]) or "model"
    response["Content-Disposition"] = (
        f'attachment; filename="{what}-{name}-{job.share_token[:8]}.{ext}"'
    )
    return response
