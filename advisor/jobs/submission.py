"""Submitting a job from plain values (the JSON API, `manage.py submit_job`).

The values are the new-job form's fields and go through `JobForm`, so a
script gets the same checks and the same messages as the browser; a field
left out takes the form's initial value, as an untouched form field would.
The prompt-sample upload is the browser form's only: it has no field here; a
conversation file is sent as its text (`SENT_AS_TEXT`) by the API, and as the file
itself by `submit_job` (`check`'s `files`), read by the form's own upload check.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.core.files import File
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction

from advisor.jobs import dispatch
from advisor.jobs.forms import JobForm
from advisor.jobs.models import Job
from advisor.jobs.request import strict_errors
from profiling.measure import hardware

UPLOAD_ONLY = ("prompt_file",)
# Files a browser uploads and a script sends as the text of the same field (bounded by
# the API's body limit), read by the form's own upload check.
SENT_AS_TEXT = {"conversation_file": "conversations.jsonl"}


def field_names(form: JobForm | None = None) -> tuple[str, ...]:
    """The fields a script may send: the form's (each registered technique's included),
    less the browser's uploads."""
    return tuple(name for name in (form or JobForm()).fields if name not in UPLOAD_ONLY)


Errors = dict[str, list[str]]


def token_required() -> bool:
    """Whether creating a job needs ADVISOR_API_TOKEN (on every path: form, API, CLI)."""
    return bool(settings.ADVISOR_API_TOKEN)


def token_accepted(given: str) -> bool:
    """Whether `given` may create jobs: anything when no token is set, else only the token."""
    expected = settings.ADVISOR_API_TOKEN
    if not expected:
        return True
    return secrets.compare_digest(given.encode("utf-8", "replace"), expected.encode())


def defaults(form: JobForm | None = None) -> dict[str, Any]:
    """Each field's initial value on a fresh form (512/128/8, quick, demo, …)."""
    form = form or JobForm()
    return {name: form[name].initial for name in field_names(form) if name not in SENT_AS_TEXT}


def bind(
    values: dict[str, Any], files: dict[str, File] | None = None
) -> tuple[JobForm | None, Errors]:
    """A bound, validated form for `values` over the defaults, with `files` as a browser's
    uploads of those fields; or None and the errors.

    Errors are `{field: [messages]}`; "__all__" holds those of no one field.
    """
    values = dict(values)
    blank = JobForm()  # its fields and first values: one read of the live workers
    fields = field_names(blank)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        known = ", ".join(fields)
        return None, {name: [f"Unknown field. The fields are: {known}."] for name in unknown}
    files = dict(files or {})
    for name, filename in SENT_AS_TEXT.items():
        text = values.pop(name, "")
        if isinstance(text, str) and text:
            files[name] = SimpleUploadedFile(filename, text.encode("utf-8", "surrogatepass"))
    form = JobForm(data={**defaults(blank), **values}, files=files)
    if not form.is_valid():
        return None, {name: list(messages) for name, messages in form.errors.items()}
    return form, {}


def gpu_key(text: str) -> str:
    """A GPU kind as a person types it ("H100", "a100-80gb") → its catalog key; blank stays
    blank and an unknown name is left for the form to refuse in its words. The one
    resolver of every entry point: the form's choices are keys already."""
    try:
        return hardware.lookup(text).key if text else ""
    except hardware.UnknownGPU:
        return text


def check(
    values: dict[str, Any], files: dict[str, File] | None = None
) -> tuple[JobForm | None, Errors]:
    """`values` from a script, strictly typed (JSON's types, storable text) and then
    checked by the form with `files` (a field's file, as a browser uploads it): a bound,
    valid form, or None and every field's errors."""
    if isinstance(values.get("gpu_kind"), str):
        values = {**values, "gpu_kind": gpu_key(values["gpu_kind"])}
    refused = strict_errors(values)
    form, errors = bind({k: v for k, v in values.items() if k not in refused}, files)
    errors = {**errors, **refused}
    return (form if not errors else None), errors


def submit(form: JobForm, origin: str = Job.Origin.FORM) -> Job:
    """Save the validated form's job QUEUED and publish it; raises QueueUnavailable.

    As the new-job view does: the message goes out when the block commits, and
    a broker that is down leaves no row behind.
    """
    job = form.save(commit=False)
    job.origin = origin
    with transaction.atomic():
        dispatch.submit(job)
        form.save_m2m()
    return job
