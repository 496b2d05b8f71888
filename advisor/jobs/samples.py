"""An uploaded prompt file → an unsaved `PromptSample`, checked with the library's parser.

The parser is the CLI's (`profiling.caching.sample`), so a file refused here is
refused there in the same words, line number included. The upload's size is
checked before it is read, and the request only parses: tokenizing and the
reuse analysis happen on the worker.
"""

from __future__ import annotations

import hashlib

from django import forms
from django.core.files.uploadedfile import UploadedFile

from advisor.jobs.models import PromptSample
from profiling import units
from profiling.caching.sample import PromptSampleError, parse_prompt_sample
from profiling.config import PROMPT_SAMPLE_MAX_BYTES

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
