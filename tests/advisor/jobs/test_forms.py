"""JobForm: the model, the workload and where it runs; every case on the field it is about."""

from __future__ import annotations

import pytest

from advisor.jobs import dispatch
from advisor.jobs.forms import WAIT_FOR_TARGET, JobForm
from advisor.jobs.models import Job, Worker
from tests.advisor.formdata import demo_form

pytestmark = pytest.mark.django_db


form_data = demo_form


def errors_of(**changes: str) -> dict[str, list[str]]:
    form = JobForm(form_data(**changes))
    assert not form.is_valid()
    return form.errors


# Defaults and the happy path ------------------------------------------------------


def test_it_defaults_to_the_demo_model_in_quick_mode_with_a_sensible_workload(cpu_worker):
    form = JobForm()
    assert form["model_source"].value() == "demo"
    assert form["model_name"].value() == "demo"
    assert form["quick"].value() is True
    assert (form["prompt_tokens"].value(), form["output_tokens"].value(),
            form["concurrency"].value()) == (512, 128, 8)  # fmt: skip


def test_a_valid_demo_job_goes_to_the_any_worker_queue(cpu_worker):
    form = JobForm(form_data(model_name="demo-draft", ttft_ms="250", tpot_ms="40.5"))
    assert form.is_valid(), form.errors
    job = form.save(commit=False)
    assert job.model_name == "demo-draft"
    assert job.queue == dispatch.queue_for(Job(gpu_kind=""))
    assert (job.ttft_ms, job.tpot_ms) == (250.0, 40.5)


# Model name by source -----------------------------------------------------------


def test_it_rejects_an_unknown_demo_name(cpu_worker):
    assert "built-in models" in errors_of(model_name="llama")["model_name"][0]


@pytest.mark.parametrize("name", ["Qwen/Qwen2.5-0.5B", "gpt2", "meta-llama/Llama-3.1-8B"])
def test_it_accepts_hub_ids(cpu_worker, name):
    form = JobForm(form_data(model_source="hub", model_name=name))
    assert form.is_valid(), form.errors


@pytest.mark.parametrize(
    "name", ["../../etc/passwd", "/etc/passwd", "a/b/c", "a--b", "x" * 97, "bad name", "-x"]
)
def test_it_rejects_what_is_not_a_hub_id_and_never_reads_it_as_a_path(cpu_worker, name):
    assert "Hub id" in errors_of(model_source="hub", model_name=name)["model_name"][0]


def test_a_local_directory_must_be_absolute(cpu_worker, model_root):
    errors = errors_of(model_source="local", model_name="models/tiny")
    assert "absolute" in errors["model_name"][0]


def test_a_local_directory_under_an_allowed_root_is_stored_resolved(cpu_worker, model_root):
    form = JobForm(form_data(model_source="local", model_name=f"{model_root}/tiny/../tiny"))
    assert form.is_valid(), form.errors
    assert form.save(commit=False).model_name == str((model_root / "tiny").resolve())


@pytest.mark.parametrize("where", ["/etc", "{root}/../../etc", "{root}/../outside"])
def test_a_local_directory_outside_the_roots_is_refused(cpu_worker, model_root, where):
    errors = errors_of(model_source="local", model_name=where.format(root=model_root))
    assert "only be loaded from under" in errors["model_name"][0]


def test_a_symlink_inside_a_root_that_points_outside_is_refused(cpu_worker, model_root, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (model_root / "sneaky").symlink_to(outside)
    errors = errors_of(model_source="local", model_name=str(model_root / "sneaky"))
    assert "only be loaded from under" in errors["model_name"][0]


def test_local_directories_are_off_without_roots(cpu_worker, settings):
    settings.ADVISOR_MODEL_ROOTS = []
    errors = errors_of(model_source="local", model_name="/models/x")
    assert "turned off" in errors["model_name"][0]


def test_config_only_takes_a_hub_id_or_an_allowed_directory(cpu_worker, model_root):
    assert JobForm(form_data(model_source="config", model_name="Qwen/Qwen2.5-0.5B")).is_valid()
    assert JobForm(form_data(model_source="config", model_name=str(model_root / "tiny"))).is_valid()
    assert "model_name" in errors_of(model_source="config", model_name="/etc")
    assert "model_name" in errors_of(model_source="config", model_name="../x")


def test_it_rejects_an_empty_model_name(cpu_worker):
    assert "model_name" in errors_of(model_name="")


# Numbers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("prompt_tokens", "0", "greater than or equal to 1"),
        ("prompt_tokens", "-5", "greater than or equal to 1"),
        ("prompt_tokens", "99999999999", "less than or equal to"),
        ("prompt_tokens", "lots", "whole number"),
        ("output_tokens", "0", "greater than or equal to 1"),
        ("output_tokens", "1e9", "whole number"),
        ("concurrency", "-1", "greater than or equal to 1"),
        ("concurrency", "100000", "less than or equal to 4096"),
        ("concurrency", "2.5", "whole number"),
        ("gpu_count", "0", "greater than or equal to 1"),
        ("shared_prefix_tokens", "-1", "greater than or equal to 0"),
        ("ttft_ms", "0", "greater than or equal to"),
        ("ttft_ms", "-20", "greater than or equal to"),
        ("ttft_ms", "1e400", "number"),
        ("tpot_ms", "nan", "number"),
        ("tpot_ms", "1e12", "less than or equal to"),
        ("tpot_ms", "fast", "number"),
    ],
)
def test_bad_numbers_get_a_clear_error_on_their_field(cpu_worker, field, value, words):
    errors = errors_of(**{field: value})
    assert list(errors) == [field]
    assert words in errors[field][0]


def test_the_shared_prefix_cannot_exceed_the_prompt(cpu_worker):
    errors = errors_of(prompt_tokens="100", shared_prefix_tokens="101")
    assert list(errors) == ["shared_prefix_tokens"]


def test_a_shared_prefix_equal_to_the_prompt_is_fine(cpu_worker):
    assert JobForm(form_data(prompt_tokens="100", shared_prefix_tokens="100")).is_valid()


def test_notes_have_a_length_limit(cpu_worker):
    assert "at most 4000" in errors_of(notes="x" * 4001)["notes"][0]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("dtype", "int3"),
        ("gpu_kind", "TPU-v9"),
        ("stated_bottleneck", "vibes"),
        ("model_source", "ftp"),
    ],
)
def test_unknown_choices_are_refused_on_their_field(cpu_worker, field, value):
    assert field in errors_of(**{field: value})


# Where it runs ------------------------------------------------------------------


def test_a_target_without_a_live_worker_asks_where_to_run(cpu_worker):
    form = JobForm(form_data(gpu_kind="H100-SXM"))
    assert not form.is_valid()
    assert "No live worker serves" in form.errors["gpu_kind"][0]
    assert form.target_unserved
    assert "no live worker now" in dict(form.fields["gpu_kind"].choices)["H100-SXM"]


def test_run_on_lists_live_queues_with_their_workers(cpu_worker):
    choices = dict(JobForm().fields["run_on"].choices)
    assert choices["cpu"] == "cpu — local@host (CPU)"
    assert WAIT_FOR_TARGET in choices


def test_running_elsewhere_keeps_the_target_for_projection(cpu_worker):
    form = JobForm(form_data(gpu_kind="H100-SXM", gpu_count="2", run_on="cpu"))
    assert form.is_valid(), form.errors
    job = form.save(commit=False)
    assert (job.queue, job.gpu_kind, job.gpu_count) == ("cpu", "H100-SXM", 2)


def test_a_run_on_queue_that_went_away_is_an_error_on_run_on(cpu_worker):
    errors = errors_of(run_on="gpu-gone")
    assert list(errors) == ["run_on"]
    assert "no longer live" in errors["run_on"][0]


def test_with_no_workers_at_all_it_says_so_and_how_to_start_one():
    form = JobForm(form_data())
    assert form.no_workers
    assert not form.is_valid()
    assert "No worker is connected" in form.errors["gpu_kind"][0]
    assert "run-local" in form.errors["gpu_kind"][0]


def test_it_can_wait_in_the_target_queue_for_a_worker_to_start():
    form = JobForm(form_data(gpu_kind="H100-SXM", run_on=WAIT_FOR_TARGET))
    assert form.is_valid(), form.errors
    assert form.save(commit=False).queue == dispatch.queue_for(Job(gpu_kind="H100-SXM"))


def test_a_stale_worker_does_not_count_as_live(cpu_worker, settings):
    from datetime import timedelta

    from django.utils import timezone

    Worker.objects.update(
        last_seen=timezone.now() - timedelta(seconds=settings.ADVISOR_WORKER_STALE_S + 5)
    )
    assert JobForm().no_workers
