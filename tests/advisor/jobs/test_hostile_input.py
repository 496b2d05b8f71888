"""Hostile input on every way in: a clear 4xx naming the problem, nothing saved, never a 500.

Runs on SQLite and again on PostgreSQL (which refuses NUL and lone surrogates
outright, where SQLite stores them). Each case was a 500, or was accepted,
before the one strict validation path.
"""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from advisor.jobs.models import Comment, Job, PromptSample
from tests.advisor.formdata import demo_form
from tests.advisor.pages import csrf_token, make_job

pytestmark = pytest.mark.django_db
JOBS = "/api/v1/jobs"


@pytest.fixture(autouse=True)
def _live_worker(cpu_worker):
    """A live CPU worker row, so a valid job's only errors are the ones under test."""


def api_post(body: str | bytes, client: Client | None = None):
    client = client or Client(enforce_csrf_checks=True)
    return client.post(JOBS, body, content_type="application/json")


def api_errors(values: dict) -> dict[str, list[str]]:
    response = api_post(json.dumps(values))
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    return response.json()["errors"]


def form_post(client: Client, **changes):
    return client.post("/", {**demo_form(**changes), "csrfmiddlewaretoken": csrf_token(client)})


# The JSON API ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", ["²", "①", "1,²", "٣"])
def test_non_ascii_digits_in_k_are_a_field_error(k, cpu_worker):
    assert "spec_ks" in api_errors({"spec_ks": k})
    response = form_post(Client(enforce_csrf_checks=True), spec_ks=k, run_speculative="on")
    assert response.status_code == 200 and "whole numbers" in response.content.decode()
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("prompt_tokens", "16", "JSON number"),
        ("prompt_tokens", 16.0, "JSON number"),
        ("concurrency", True, "JSON number"),
        ("quick", "maybe", "true or false"),
        ("quick", "true", "true or false"),
        ("quick", 1, "true or false"),
        ("notes", ["a", "list"], "JSON string"),
        ("precisions", "fp32,int8", "JSON list"),
        ("ttft_ms", "250", "JSON number"),
    ],
)
def test_json_types_are_json_types(field, value, words):
    errors = api_errors({field: value})
    assert list(errors) == [field] and words in errors[field][0]
    assert not Job.objects.exists()


@pytest.mark.postgres
@pytest.mark.parametrize("value", [10**30, -5, 0, 2**63])
def test_huge_and_negative_numbers_are_refused(value):
    assert "prompt_tokens" in api_errors({"prompt_tokens": value})


@pytest.mark.postgres
@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "nul\x00byte"])
def test_text_no_database_can_store_is_refused(text):
    body = json.dumps({"notes": text, "model_name": "demo"})  # json escapes them: \\ud800
    errors = api_errors(json.loads(body))
    assert "notes" in errors and ("surrogate" in errors["notes"][0] or "NUL" in errors["notes"][0])


def test_a_deeply_nested_body_is_a_json_400():
    response = api_post("[" * 20_000 + "]" * 20_000)
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["errors"]["__all__"][0]


def test_an_oversized_body_is_a_json_413(settings):
    response = api_post(json.dumps({"notes": "x" * (settings.ADVISOR_API_MAX_BODY_BYTES + 1)}))
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert "is over 64.0 KiB" in response.json()["error"]


@pytest.mark.postgres
def test_oversized_fields_are_refused():
    assert "notes" in api_errors({"notes": "x" * 4001})
    assert "model_name" in api_errors({"model_name": "m" * 513})


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("local", "/var/lib/../../etc"),
        ("local", "relative/dir"),
        ("hub", "../../etc/passwd"),
        ("hub", "/etc/passwd"),
        ("config", "/proc/self/../../etc"),
    ],
)
def test_path_escapes_in_model_ids_are_refused(source, name, settings, tmp_path):
    settings.ADVISOR_MODEL_ROOTS = [str(tmp_path)]
    assert "model_name" in api_errors({"model_source": source, "model_name": name})


def test_an_empty_list_of_model_roots_allows_no_local_directory(settings, tmp_path):
    settings.ADVISOR_MODEL_ROOTS = []
    errors = api_errors({"model_source": "local", "model_name": str(tmp_path)})
    assert "turned off" in errors["model_name"][0]


@pytest.mark.parametrize("token", ["A" * 200, "x%00y", "..%2F..%2Fetc", "%F0%9F%98%80", "a'b"])
def test_tampered_share_ids_are_404(token):
    make_job()
    client = Client()
    assert client.get(f"/jobs/{token}/").status_code == 404
    response = client.get(f"{JOBS}/{token}")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"


# Prompt-file uploads through the form ---------------------------------------------------


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"first prompt\nsecond \xff\xfe prompt\n", "not UTF-8 text (an invalid byte on line 2)"),
        (b"one\ntwo\x00three\n", "NUL byte on line 2"),
        (b'{"prompt": "fine"}\n{"prompt": "bad \\u0000 here"}\n', "line 2: the prompt holds a NUL"),
        (b'{"prompt": "fine"}\n{"prompt": "half \\ud800 pair"}\n', "line 2: the prompt holds a"),
        (b'{"prompt": "ok"}\n' + b'{"prompt": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n",
         "line 2: JSON nested too deeply"),
        (b"\xed\xa0\x80 encoded surrogate\n", "not UTF-8 text"),
    ],
)  # fmt: skip
def test_a_bad_prompt_file_is_a_field_error_naming_the_line(content, words, cpu_worker):
    client = Client(enforce_csrf_checks=True)
    upload = SimpleUploadedFile("prompts.jsonl", content, content_type="text/plain")
    response = form_post(client, prompt_file=upload)
    assert response.status_code == 200
    assert words.lower() in response.content.decode().replace("&quot;", '"').lower()
    assert not Job.objects.exists() and not PromptSample.objects.exists()


# Comments ---------------------------------------------------------------------------------


@pytest.mark.postgres
def test_a_comment_with_a_nul_is_refused_and_not_stored():
    job = make_job()
    client = Client(enforce_csrf_checks=True)
    page = f"/jobs/{job.share_token}/"
    response = client.post(
        f"/reports/{job.share_token}/comments",
        {"text": "a\x00b", "csrfmiddlewaretoken": csrf_token(client, page)},
    )
    assert response.status_code == 400
    assert not Comment.objects.exists()


@pytest.mark.postgres
def test_text_over_its_length_is_refused_though_trimming_would_bring_it_under():
    # The document's maxLength counts the text as sent; the form would trim it first.
    errors = api_errors({"notes": "\v" + "x" * 4000})
    assert errors["notes"] == ["Ensure this value has at most 4000 characters (it has 4001)."]
