"""An uploaded prompt file → an unsaved `PromptSample`, checked with the library's parser,
and the new-job form's field for it (as `conversation_upload` has the conversations').

The parser is the CLI's (`profiling.caching.sample`), so a file refused here is
refused there in the same words, line number included. The upload's size is
checked before it is read, and the request only parses: tokenizing and the
reuse analysis happen on the worker.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile

from advisor.jobs.models import PromptSample
from profiling import units
from profiling.caching.sample import PromptSampleError, parse_prompt_sample
from profiling.config import PROMPT_SAMPLE_MAX_BYTES, PROMPT_SAMPLE_MAX_PROMPTS

# A browser cannot put a chosen file back into the form it shows again.
CHOOSE_AGAIN = "Fix the file, then choose it again."
FILENAME_MAX = 255


def too_big(size: int) -> str:
    # The words of `read_prompt_sample`, which checks the CLI's file the same way.
    return (
        f"the prompt file is {units.size(size)}; the limit is {units.size(PROMPT_SAMPLE_MAX_BYTES)}"
    )


def refusal(reason: str, code: str = "prompt_file") -> forms.ValidationError:
    """The parser's reason as a form error: a sentence, then what to do."""
    sentence = reason[:1].upper() + reason[1:]
    return forms.ValidationError(f"{sentence.rstrip('.')}. {CHOOSE_AGAIN}", code=code)


def kept_file_note(filename: str, what: str) -> str:
    """After an error elsewhere: the file (`what` it held) was fine, but the browser will
    not resend it."""
    return (
        f"{filename or 'Your file'} was read ({what}), but the form has an error elsewhere "
        "and a browser cannot keep a chosen file: choose it again before you send."
    )


def sample_from_upload(upload: UploadedFile) -> PromptSample:
    """The parsed sample, not saved; raises ValidationError saying what is wrong and where."""
    if upload.size is not None and upload.size > PROMPT_SAMPLE_MAX_BYTES:
        raise refusal(too_big(upload.size))
    upload.seek(0)
    # One byte over the limit is enough for the parser to refuse a file that grew.
    data = upload.read(PROMPT_SAMPLE_MAX_BYTES + 1)
    try:
        prompts = parse_prompt_sample(data)
    except PromptSampleError as exc:
        raise refusal(str(exc)) from None
    return PromptSample(
        filename=(upload.name or "")[-FILENAME_MAX:],
        prompts=prompts,
        prompt_count=len(prompts),
        size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )


class PromptFileField(forms.Form):
    """The new-job form's prompt upload (a base of `JobForm`, as `ConversationFileField`
    is): the field, its check, the note shown when another field's error sends the form
    back, and its save."""

    prompt_sample: PromptSample | None = None  # parsed from the upload by the field's check

    prompt_file = forms.FileField(
        label="Your prompts (optional)",
        required=False,
        allow_empty_file=True,  # the parser says "empty" in the CLI's words
        widget=forms.FileInput(attrs={"accept": ".txt,.jsonl,.ndjson,.json,text/plain"}),
        help_text='A text file with one prompt per line, or JSON Lines with a "prompt" '
        'string or chat "messages" per line, in the order your server sees them '
        f"(up to {PROMPT_SAMPLE_MAX_PROMPTS:,} prompts, "
        f"{units.size(PROMPT_SAMPLE_MAX_BYTES)}). The report then says how much of their "
        "prefill a cache would reuse. Choosing a file turns this experiment on.",
    )

    def clean_prompt_file(self) -> Any:
        upload = self.cleaned_data.get("prompt_file")
        if upload:
            self.prompt_sample = sample_from_upload(upload)
        return upload

    @property
    def prompt_file_note(self) -> str:
        """After an error elsewhere: the file was fine, but the browser will not resend it."""
        sample = self.prompt_sample
        if sample is None or not self.errors:
            return ""
        return kept_file_note(sample.filename, f"{sample.prompt_count:,} prompts")

    def save_prompt_sample(self, job: Any) -> None:
        """Save the checked sample with `job` (in the transaction that saves the job)."""
        if self.prompt_sample is not None:
            self.prompt_sample.job = job
            self.prompt_sample.save()
