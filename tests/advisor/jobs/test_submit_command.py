"""`manage.py submit_job`: the form's checks, the progress bar, the link and summary, exit codes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from advisor.jobs import submission
from advisor.jobs.forms import JobForm
from advisor.jobs.management.commands.submit_job import bar, summary
from advisor.jobs.models import ConversationFile, Job, Worker
from profiling.config import CONVERSATIONS_MAX_BYTES
from tests.advisor.formdata import demo_form
from tests.advisor.jobs.test_conversation_upload import CHATS, upload
from tests.advisor.jobs.test_tasks import SMALL, missing_model
from tests.conftest import ROOT

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture
def cpu_worker(db) -> Worker:
    return Worker.objects.create(name="local@host", host="host", queues=",cpu,default,")


def run(*args: str) -> tuple[str, CommandError | None]:
    out = io.StringIO()
    try:
        call_command("submit_job", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


def cli_result() -> dict[str, Any]:
    return json.loads((FIXTURES / "cli_caching_parallel.json").read_text())


# Bad input: exit 2 ----------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prompt-tokens", "0"], "--prompt-tokens: Ensure this value is greater than or equal"),
        (["--model", "demo-nope"], "--model: The built-in models are: demo, demo-draft."),
        (["--experiments", "quantization,turbo"], "--experiments: unknown turbo"),
        (["--experiments", "quantization", "--precisions", "fp32"], "--precisions: Tick at least"),
        (["--gpu", "H100"], "--gpu: No live worker serves the gpu-h100-sxm queue"),
    ],
)
def test_bad_input_exits_2_with_the_forms_message(cpu_worker, args, message):
    out, error = run(*args)
    assert error is not None and error.returncode == 2
    assert message in str(error)
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_bad_input_exits_2_from_the_shell():
    env = {**os.environ, "ADVISOR_DB_NAME": str(connection.settings_dict["NAME"])}
    done = subprocess.run(
        [sys.executable, "manage.py", "submit_job", "--prompt-tokens", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--prompt-tokens: Ensure this value is greater than or equal to 1." in done.stderr


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "The conversation file is empty"),
        (b"What is a KV cache?\n", "Line 1: not valid JSON"),
        (CHATS + b'{"prompt": "not a chat"}\n', 'Line 3: expected a "messages" list'),
        (b'{"messages": [{"role": "user", "content": "caf\xe9"}]}\n', "Line 1: not UTF-8 text"),
    ],
)  # fmt: skip
def test_a_bad_conversation_file_exits_2_with_the_forms_message(cpu_worker, tmp_path, content,
                                                                words):  # fmt: skip
    path = tmp_path / "chats.jsonl"
    path.write_bytes(content)
    out, error = run("--no-wait", "--conversations", str(path))
    assert error is not None and error.returncode == 2
    form = JobForm(demo_form(), upload(content))  # a browser's upload of the same file
    assert not form.is_valid()
    assert f"--conversations: {form.errors['conversation_file'][0]}" in str(error)
    assert words in str(error)
    assert not Job.objects.exists() and not ConversationFile.objects.exists()


@pytest.mark.django_db
def test_a_conversation_file_over_the_size_limit_or_missing_exits_2(cpu_worker, tmp_path):
    big = tmp_path / "big.jsonl"
    with big.open("wb") as f:
        f.truncate(CONVERSATIONS_MAX_BYTES + 1)
    out, error = run("--no-wait", "--conversations", str(big))
    assert error is not None and error.returncode == 2
    said = f"--conversations: The conversation file is {CONVERSATIONS_MAX_BYTES + 1:,} bytes"
    assert said in str(error) and "over the limit" in str(error)
    missing = tmp_path / "nope.jsonl"
    out, error = run("--no-wait", "--conversations", str(missing))
    assert error is not None and error.returncode == 2
    assert f"--conversations: cannot read {missing}: No such file or directory" in str(error)
    assert not Job.objects.exists() and not ConversationFile.objects.exists()


# Submit and follow ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_no_wait_submits_with_the_flags_and_prints_the_link(cpu_worker, redis_url):
    out, error = run(
        "--no-wait", "--gpu", "h100", "--run-on", "cpu", "--experiments", "quantization,caching",
        "--precisions", "int8,fp32", "--quant-variants", "lm_head", "--full", "--ttft-ms", "300",
    )  # fmt: skip
    assert error is None
    job = Job.objects.get()
    assert out.strip() == f"submitted: /jobs/{job.share_token}/"
    assert (job.gpu_kind, job.queue, job.quick, job.ttft_ms) == ("H100-SXM", "cpu", False, 300.0)
    assert (job.run_quantization, job.run_caching, job.run_speculative) == (True, True, False)
    assert (job.precisions, job.quant_variants) == (["fp32", "int8"], ["lm_head"])
    assert job.dispatched_at is not None


@pytest.mark.django_db(transaction=True)
def test_a_conversation_file_is_kept_with_the_job_as_the_forms_upload_is(
    cpu_worker, redis_url, tmp_path
):
    path = tmp_path / "my-chats.jsonl"
    path.write_bytes(CHATS)
    out, error = run("--no-wait", "--run-on", "cpu", "--conversations", str(path))
    assert error is None, error
    kept = ConversationFile.objects.get(job=Job.objects.get(origin=Job.Origin.CLI))
    assert (kept.filename, kept.text, kept.size_bytes) == ("my-chats.jsonl", CHATS.decode(),
                                                           len(CHATS))  # fmt: skip
    form = JobForm(demo_form(), upload(CHATS))
    assert form.is_valid(), form.errors
    assert (kept.conversation_count, kept.sha256) == (form.conversation_upload.conversation_count,
                                                      form.conversation_upload.sha256)  # fmt: skip


@pytest.mark.django_db
def test_a_finished_job_prints_the_bar_link_and_summary(cpu_worker, monkeypatch):
    result = cli_result()

    def finish_at_once(form, origin):  # a worker that is done before the first poll
        assert origin == Job.Origin.CLI
        job = form.save()
        Job.objects.filter(pk=job.pk).update(
            state=Job.State.SUCCEEDED, progress=1.0, phase="done", result=result
        )
        return job

    monkeypatch.setattr(submission, "submit", finish_at_once)
    out, error = run("--poll", "0.01")
    assert error is None
    job = Job.objects.get()
    assert f"[{'#' * 30}] 100%  done" in out
    assert f"share link: /jobs/{job.share_token}/" in out
    assert result["verdict"]["summary"] in out


def test_the_bar_shows_phase_percent_and_message():
    line = bar(Job(progress=0.42, phase="decode", message="batch 4", state="running"))
    assert line == f"[{'#' * 13}{'.' * 17}]  42%  decode: batch 4"
    assert bar(Job(progress=0.0, state="queued")).endswith("0%  queued")


def test_the_summary_is_the_verdict_then_the_advice_or_the_reason():
    done = Job(state=Job.State.SUCCEEDED, result={
        "verdict": {"summary": "Decode dominates"}, "advice": {"summary": "Quantize first."},
    })  # fmt: skip
    assert summary(done) == "Decode dominates. Quantize first."
    failed = Job(state=Job.State.FAILED, error="bad model: no config.json")
    assert summary(failed) == "The job failed: bad model: no config.json"


# Against the real worker: a missing local model fails within seconds ----------------------


@pytest.mark.slow
def test_a_failing_job_exits_1_with_its_reason(worker):
    small = [f"--{k.replace('_', '-')}={v}" for k, v in SMALL.items()]
    out, error = run(
        "--source", "local", "--model", str(missing_model()), "--run-on", "cpu", "--poll", "0.2",
        *small,
    )  # fmt: skip
    assert error is not None and error.returncode == 1, out
    job = Job.objects.get()
    assert job.state == Job.State.FAILED
    assert f"share link: /jobs/{job.share_token}/" in out
    assert "The job failed: bad model: model path" in out
