"""A conversation file uploaded with a job: checked by the CLI's parser on its field, kept
with the job, and replayed by a real worker as `estimate --conversations` replays it."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from advisor.jobs import profile_config, submission
from advisor.jobs.forms import JobForm
from advisor.jobs.models import ConversationFile, Job
from advisor.jobs.request import job_request
from profiling.advice.job_conversations import attach_conversations, read_chats
from profiling.config import CONVERSATIONS_MAX_BYTES
from profiling.profile import Profile
from profiling.projection.conversation_workloads import (
    MAX_TURNS,
    ConversationError,
    parse_conversations,
)
from tests.advisor.formdata import demo_form
from tests.advisor.pages import csrf_token
from tests.advisor.reports.test_charts import real_demo_profile
from tests.advisor.reports.test_one_story import rendered, section, text
from tests.conftest import wait_for_job
from tests.profiling.projection.test_conversations import turns_file

pytestmark = pytest.mark.django_db

# Two conversations: an OpenAI chat of two turns, a ShareGPT one of one turn whose reply
# the file lacks (the workload's output tokens stand in for it).
CHATS = (
    json.dumps({"conversation_id": "a", "messages": [
        {"role": "system", "content": "You answer questions about caches."},
        {"role": "user", "content": "What is a KV cache?"},
        {"role": "assistant", "content": "The keys and values of every token so far."},
        {"role": "user", "content": "And a prefix cache?"},
        {"role": "assistant", "content": "Those of a prompt's start, kept for the next."},
    ]}) + "\n"
    + json.dumps({"id": "b", "conversations": [{"from": "human", "value": "Hello there"}]})
    + "\n"
).encode()  # fmt: skip


def upload(content: bytes, name: str = "chats.jsonl") -> dict[str, SimpleUploadedFile]:
    return {"conversation_file": SimpleUploadedFile(name, content, "application/jsonl")}


def test_a_conversation_file_is_checked_and_kept_with_the_job(cpu_worker):
    form = JobForm(demo_form(gpu_kind="L4", run_on="cpu"), upload(CHATS))
    assert form.is_valid(), form.errors
    job = form.save()
    kept = ConversationFile.objects.get(job=job)
    assert (kept.filename, kept.conversation_count, kept.size_bytes) == ("chats.jsonl", 2,
                                                                        len(CHATS))  # fmt: skip
    assert kept.turn_count == 3  # as the replay cuts them (the report's summary says 3)
    assert kept.sha256 == hashlib.sha256(CHATS).hexdigest()
    # The worker's config carries the file's text and name, and nothing else changes.
    config = profile_config.config_for(job)
    assert (config.conversations, config.conversations_name) == (CHATS.decode(), "chats.jsonl")
    assert parse_conversations(config.conversations) == parse_conversations(CHATS)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "The conversation file is empty"),
        (b"\n \n", "The conversation file is empty"),
        (b"What is a KV cache?\n", "Line 1: not valid JSON"),
        (CHATS + b'{"prompt": "a prompt sample, not a chat"}\n',
         'Line 3: expected a "messages" list (OpenAI chat) or a "conversations" list'),
        (b'{"messages": [{"role": "assistant", "content": "hi"}]}\n', "no user message"),
        (b'{"messages": [{"role": "user", "content": "caf\xe9"}]}\n', "Line 1: not UTF-8 text"),
    ],
)  # fmt: skip
def test_a_bad_conversation_file_is_an_error_on_its_field_in_the_clis_words(
    cpu_worker, content, words
):
    form = JobForm(demo_form(prompt_tokens="256", notes="keep me"), upload(content))
    assert not form.is_valid()
    assert list(form.errors) == ["conversation_file"]
    message = form.errors["conversation_file"][0]
    assert words in message and "choose it again" in message
    try:
        parse_conversations(content)
    except ConversationError as exc:  # the CLI's reader says the same, capitalised
        assert message.startswith(str(exc)[:1].upper() + str(exc)[1:])
    # Everything else the user typed comes back as typed.
    assert (form["prompt_tokens"].value(), form["notes"].value()) == ("256", "keep me")
    assert not ConversationFile.objects.exists()


class UnreadableUpload(SimpleUploadedFile):
    def read(self, *args: Any) -> bytes:
        raise AssertionError("an oversized upload must be refused before it is read")

    chunks = read


def test_an_oversized_file_is_refused_by_its_size_before_it_is_read(cpu_worker):
    big = UnreadableUpload("huge.jsonl", b"{}\n")
    big.size = CONVERSATIONS_MAX_BYTES + 1
    form = JobForm(demo_form(), {"conversation_file": big})
    assert not form.is_valid() and list(form.errors) == ["conversation_file"]
    assert "is 8,388,609 bytes, over the limit of 8.00 MiB" in form.errors["conversation_file"][0]


def test_a_good_file_with_an_error_elsewhere_asks_to_choose_it_again(cpu_worker):
    form = JobForm(demo_form(prompt_tokens="0"), upload(CHATS))
    assert not form.is_valid() and list(form.errors) == ["prompt_tokens"]
    assert "chats.jsonl was read (2 conversations)" in form.conversation_file_note
    assert not ConversationFile.objects.exists()


def test_the_page_shows_a_bad_files_error_and_keeps_the_other_values(browser, cpu_worker):
    data = {**demo_form(prompt_tokens="300", notes="my chats"),
            "csrfmiddlewaretoken": csrf_token(browser), **upload(b"not json\n")}  # fmt: skip
    response = browser.post("/", data)
    assert response.status_code == 200 and not Job.objects.exists()
    page = response.content.decode()
    field = page.split('id="field-conversation_file"')[1].split("</div>")[0]
    assert "Line 1: not valid JSON" in field
    assert 'name="prompt_tokens" value="300"' in page and "my chats</textarea>" in page


def post_json(client, body: dict[str, Any]):
    return client.post("/api/v1/jobs", json.dumps(body), content_type="application/json")


def test_a_script_sends_the_files_text_and_the_job_keeps_it_as_the_form_would(client, cpu_worker):
    body = {"gpu_kind": "L4", "run_on": "cpu", "conversation_file": CHATS.decode()}
    response = post_json(client, body)
    assert response.status_code == 201, response.content
    kept = ConversationFile.objects.get(job=Job.objects.get())
    assert (kept.text, kept.conversation_count) == (CHATS.decode(), 2)
    assert kept.filename == "conversations.jsonl"


@pytest.mark.parametrize(
    ("sent", "words"),
    [("not json\n", "Line 1: not valid JSON"), (["a list"], "Send a JSON string."),
     ('{"messages": []}', "Line 1: the message list must be a non-empty list")],
)  # fmt: skip
def test_a_bad_conversation_text_is_a_400_on_its_field(client, cpu_worker, sent, words):
    response = post_json(client, {"prompt_tokens": 256, "conversation_file": sent})
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert list(errors) == ["conversation_file"] and words in errors["conversation_file"][0]
    assert not Job.objects.exists()


def refusal_on(surface: str, content: bytes, client, tmp_path: Path) -> str:
    """The conversation file's error as `surface` reports it (form, API or submit_job)."""
    if surface == "form":
        form = JobForm(demo_form(), upload(content))
        assert not form.is_valid() and list(form.errors) == ["conversation_file"]
        return form.errors["conversation_file"][0]
    if surface == "api":
        response = post_json(client, {"conversation_file": content.decode()})
        assert response.status_code == 400
        errors = response.json()["errors"]
        assert list(errors) == ["conversation_file"]
        return errors["conversation_file"][0]
    path = tmp_path / "chats.jsonl"
    path.write_bytes(content)
    try:
        call_command("submit_job", "--no-wait", "--conversations", str(path), stdout=StringIO())
    except CommandError as exc:
        assert exc.returncode == 2
        return str(exc)
    raise AssertionError("submit_job took the file")


@pytest.mark.parametrize("surface", ["form", "api", "submit_job"])
def test_a_file_over_the_turn_cap_is_refused_on_every_surface_saying_how_many(
    client, cpu_worker, settings, tmp_path, surface
):
    content = turns_file(MAX_TURNS + 1).encode()
    settings.ADVISOR_API_MAX_BODY_BYTES = 2 * len(content)  # the cap, not the body limit
    said = refusal_on(surface, content, client, tmp_path)
    assert f"holds {MAX_TURNS + 1:,} turns, over the limit of {MAX_TURNS:,}" in said
    assert not Job.objects.exists() and not ConversationFile.objects.exists()


def test_a_file_at_the_turn_cap_is_taken_and_the_cap_is_stated_where_the_file_is_asked_for(
    cpu_worker,
):
    form = JobForm(demo_form(), upload(turns_file(MAX_TURNS).encode()))
    assert form.is_valid(), form.errors
    stated = f"{MAX_TURNS:,} turns"
    assert stated in form.fields["conversation_file"].help_text
    schema = job_request().model_json_schema()["properties"]["conversation_file"]
    assert stated in schema["description"]


def test_the_report_says_the_conversations_came_from_the_uploaded_file(client, demo_model_dir):
    from transformers import AutoTokenizer

    profile = Profile.from_dict(real_demo_profile())  # an H100 target
    profile.config.conversations_name = "chats.jsonl"
    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir)
    chats = read_chats(CHATS.decode(), "chats.jsonl", tokenizer, profile.config.workload)
    attach_conversations(profile, None, chats=chats)
    summary = profile.conversations["served"]["summary"]
    assert (summary["conversations"], summary["turns"]) == (2, 3)  # the file's, not synthetic
    _, page = rendered(client, profile.to_dict())
    said = text(section(page, "conversations"))
    assert "Conversations from your file chats.jsonl" in said
    assert "2 conversations, 3 turns" in said


def cli_estimate(model: Path, tmp_path: Path) -> dict[str, Any]:
    """`estimate --conversations` on the same file and workload: the section it prints."""
    path, out = tmp_path / "chats.jsonl", tmp_path / "estimate.json"
    path.write_bytes(CHATS)
    done = subprocess.run(
        [sys.executable, "-m", "profiling", "estimate", str(model), "--gpu", "L4",
         "--prompt-tokens", "64", "--output-tokens", "16", "--concurrency", "2",
         "--think-seconds", "5", "--conversations", str(path), "--json", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())["conversations"]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_job_with_a_conversation_file_reaches_the_projection_with_those_chats(
    worker, demo_model_dir, tmp_path
):
    values = demo_form(gpu_kind="L4", run_on="cpu", prompt_tokens="64", output_tokens="16",
                       concurrency="2", conversation_think_s="5")  # fmt: skip
    form = JobForm(values, upload(CHATS))
    assert form.is_valid(), form.errors
    job = wait_for_job(submission.submit(form).pk)  # saved and published, as the view does
    assert job.state == Job.State.SUCCEEDED, job.error
    section = job.result["conversations"]
    assert section is not None, job.result["warnings"]
    # The file's two conversations and three turns (no synthetic turns were asked for).
    summary = section["served"]["summary"]
    assert (summary["conversations"], summary["turns"]) == (2, 3)
    assert section["source"] == "your file chats.jsonl"
    # Tokenized and replayed as the CLI's --conversations does: the same token counts, hits
    # and capacity (this CPU run projects onto the L4's datasheet, as the estimate does).
    printed = cli_estimate(demo_model_dir, tmp_path)
    assert section["served"]["summary"] == printed["served"]["summary"]
    for key in ("hit_rate", "capacity_tokens", "prefill_tokens_saved"):
        assert section["served"][key] == printed["served"][key], key
    assert section["source"] == printed["source"]
    # The result names the file but keeps no copy of it.
    assert job.result["config"]["conversations"] == ""
    assert job.result["config"]["conversations_name"] == "chats.jsonl"
