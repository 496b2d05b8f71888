"""An uploaded conversation file → an unsaved `ConversationFile`, checked with the
library's parser, and the new-job form's field for it.

The parser is the CLI's (`estimate --conversations`, `profiling.projection.conversation_workloads`),
so a file refused here is refused there in the same words, line number included. The
upload's size is checked before it is read; the request only parses, and the worker
parses the stored text again and tokenizes it with the model's own tokenizer. Nothing
is written to disk: the text lives in the database row, bounded by
CONVERSATIONS_MAX_BYTES; the parser refuses a file of more than MAX_TURNS turns.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile

from advisor.jobs.models import ConversationFile
from advisor.jobs.samples import FILENAME_MAX, kept_file_note, refusal
from profiling import units
from profiling.config import CONVERSATIONS_MAX_BYTES
from profiling.projection.conversation_workloads import (
    MAX_TURNS,
    ConversationError,
    decode,
    parse_conversations,
    too_big,
)
from profiling.text import text_problem

CODE = "conversation_file"


def conversations_from_upload(upload: UploadedFile) -> ConversationFile:
    """The checked file, not saved; raises ValidationError saying what is wrong and where."""
    if upload.size is not None and upload.size > CONVERSATIONS_MAX_BYTES:
        raise refusal(too_big(upload.size), CODE)
    upload.seek(0)
    data = upload.read(CONVERSATIONS_MAX_BYTES + 1)  # a file that grew is caught here
    if len(data) > CONVERSATIONS_MAX_BYTES:
        raise refusal(too_big(len(data)), CODE)
    try:
        text = decode(data)
        records = parse_conversations(text)
    except ConversationError as exc:
        raise refusal(str(exc), CODE) from None
    problem = text_problem(text)
    if problem is not None:  # the parser refuses these first; the database must never see them
        raise refusal(f"the file holds {problem}", CODE)
    return ConversationFile(
        filename=(upload.name or "")[-FILENAME_MAX:],
        text=text,
        conversation_count=len(records),
        turn_count=sum(record.turns for record in records),
        size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )


class ConversationFileField(forms.Form):
    """The new-job form's conversation upload (a base of `JobForm`): the field, its
    check, and the note shown when another field's error sends the form back."""

    conversation_file = forms.FileField(
        label="Your conversations (optional)",
        required=False,
        allow_empty_file=True,  # the parser says "empty" in the CLI's words
        widget=forms.FileInput(attrs={"accept": ".jsonl,.ndjson,.json"}),
        help_text='JSON Lines, one conversation a line: OpenAI chat ("messages" of "role" '
        'and "content") or ShareGPT ("conversations" of "from" and "value"), up to '
        f"{units.size(CONVERSATIONS_MAX_BYTES)} and {MAX_TURNS:,} turns. Counted with the "
        "model's own tokenizer and replayed through the prefix cache at your GPUs' KV "
        "capacity, with the think time above, instead of synthetic turns, on the GPU kind "
        "above (else the GPU the job runs on).",
    )

    def clean_conversation_file(self) -> Any:
        upload = self.cleaned_data.get("conversation_file")
        if upload:
            self.conversation_upload = conversations_from_upload(upload)
        return upload

    @property
    def conversation_file_note(self) -> str:
        """After an error elsewhere: the file was fine, but the browser will not resend it."""
        found: ConversationFile | None = getattr(self, "conversation_upload", None)
        if found is None or not self.errors:
            return ""
        return kept_file_note(found.filename, f"{found.conversation_count:,} conversations")

    def save_conversations(self, job: Any) -> None:
        """Save the checked file with `job` (in the transaction that saves the job)."""
        found: ConversationFile | None = getattr(self, "conversation_upload", None)
        if found is not None:
            found.job = job
            found.save()
