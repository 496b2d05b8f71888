"""JobForm, the experiments' fields: speculative decoding, quantization, prefix caching
and parallelism, each case on the field it is about."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from advisor.jobs.forms import JobForm
from advisor.jobs.models import Job, PromptSample
from profiling.caching.sample import PromptSampleError, parse_prompt_sample
from profiling.config import PROMPT_SAMPLE_MAX_BYTES, PROMPT_SAMPLE_MAX_PROMPTS, ProfileConfig
from tests.advisor.formdata import demo_form

pytestmark = pytest.mark.django_db


form_data = demo_form


def errors_of(**changes: str) -> dict[str, list[str]]:
    form = JobForm(form_data(**changes))
    assert not form.is_valid()
    return form.errors


# Speculative decoding -------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("0", "from 1 to 16"),
        ("17", "from 1 to 16"),
        ("a,b", "whole numbers"),
        ("1,,2", "whole numbers"),
        ("-1", "whole numbers"),
        ("1,2,3,4,5,6,7,8,9", "At most 8"),
    ],
)
def test_bad_k_values_get_an_error_on_their_field(cpu_worker, value, words):
    errors = errors_of(run_speculative="on", spec_ks=value)
    assert list(errors) == ["spec_ks"]
    assert words in errors["spec_ks"][0]


@pytest.mark.parametrize(("quick", "ks"), [(True, [1, 2, 4]), (False, [1, 2, 3, 4, 6, 8])])
def test_blank_k_values_sweep_what_the_library_sweeps(cpu_worker, quick, ks):
    """One default for the site and the CLI: blank K is the experiment's own sweep."""
    from advisor.jobs.profile_config import config_for
    from profiling.speculative.experiment import make_plan

    data = form_data(run_speculative="on", spec_ks=" ")
    if not quick:
        data.pop("quick", None)
    form = JobForm(data)
    assert form.is_valid(), form.errors
    job = form.save(commit=False)
    assert job.spec_ks == [] and job.quick is quick
    config = config_for(job)
    assert config.spec_ks == []
    assert make_plan(config.quick, 1, 16).ks == ks


def test_k_values_are_stored_sorted_without_repeats(cpu_worker):
    form = JobForm(form_data(run_speculative="on", spec_ks="8, 2,2,1"))
    assert form.is_valid(), form.errors
    assert form.save(commit=False).spec_ks == [1, 2, 8]


@pytest.mark.parametrize("name", ["", "demo-draft", "Qwen/Qwen2.5-0.5B"])
def test_a_draft_may_be_blank_a_demo_name_or_a_hub_id(cpu_worker, name):
    form = JobForm(form_data(run_speculative="on", draft_model=name))
    assert form.is_valid(), form.errors
    assert form.save(commit=False).draft_model == name


def test_a_draft_directory_must_lie_under_an_allowed_root(cpu_worker, model_root, tmp_path):
    assert "only be loaded from under" in errors_of(draft_model=str(tmp_path))["draft_model"][0]
    form = JobForm(form_data(draft_model=str(model_root / "tiny")))
    assert form.is_valid(), form.errors
    assert form.save(commit=False).draft_model == str((model_root / "tiny").resolve())


def test_a_draft_that_is_not_a_hub_id_is_an_error_on_its_field(cpu_worker):
    assert "Not a Hugging Face Hub id" in errors_of(draft_model="bad id!")["draft_model"][0]


def test_the_form_page_has_a_speculative_fieldset(cpu_worker):
    html = JobForm().as_div()  # the fields exist; the page layout is tested in test_new_job_view
    for name in ("run_speculative", "draft_model", "spec_ks", "prompt_lookup"):
        assert f'name="{name}"' in html
    form = JobForm()
    assert form["spec_ks"].value() == "" and form["prompt_lookup"].value() is True


def test_config_for_maps_the_speculative_fields(cpu_worker):
    from advisor.jobs.profile_config import config_for

    form = JobForm(
        form_data(run_speculative="on", draft_model="demo-draft", spec_ks="4,1", prompt_lookup="")
    )
    assert form.is_valid(), form.errors
    config = config_for(form.save(commit=False))
    assert config.experiments == ["speculative"]
    assert (config.draft, config.spec_ks, config.prompt_lookup) == ("demo-draft", [1, 4], False)


def test_config_for_without_speculative_runs_no_experiment(cpu_worker):
    from advisor.jobs.profile_config import config_for

    config = config_for(Job(model_name="demo"))
    assert config.experiments == [] and config.draft is None


# Quantization ---------------------------------------------------------------------


def test_the_form_ticks_a_float_reference_int8_and_int4_and_says_which_is_the_reference(
    cpu_worker,
):
    form = JobForm()
    assert form["precisions"].value() == ["fp32", "int8", "int4"]
    assert form["quant_variants"].value() == [] and form["run_quantization"].value() is False
    help_text = form.fields["precisions"].help_text
    assert "first ticked" in help_text and "reference" in help_text
    assert "CUDA" in help_text and "not available here" in help_text


def test_quantization_choices_are_stored_in_the_pages_order_reference_first(cpu_worker):
    form = JobForm(
        form_data(
            run_quantization="on",
            precisions=["int4", "bf16", "int8"],
            quant_variants=["embeddings", "lm_head"],
        )
    )
    assert form.is_valid(), form.errors
    job = form.save(commit=False)
    assert (job.run_quantization, job.precisions, job.quant_variants) == (
        True, ["bf16", "int8", "int4"], ["lm_head", "embeddings"],
    )  # fmt: skip


@pytest.mark.parametrize("chosen", [[], ["int8"]])
def test_quantization_needs_two_precisions_with_the_error_on_the_field(cpu_worker, chosen):
    errors = errors_of(run_quantization="on", precisions=chosen)
    assert list(errors) == ["precisions"]
    assert "at least 2 precisions" in errors["precisions"][0]


def test_one_precision_is_fine_while_quantization_is_off(cpu_worker):
    form = JobForm(form_data(precisions=["int8"]))
    assert form.is_valid(), form.errors
    assert form.save(commit=False).run_quantization is False


@pytest.mark.parametrize(
    ("field", "chosen", "bad"),
    [
        ("precisions", ["fp32", "int3"], "int3"),
        ("precisions", ["fp32", "fp32,int8"], "fp32,int8"),
        ("quant_variants", ["lm_head", "everything"], "everything"),
    ],
)
def test_unknown_quantization_names_are_refused_on_their_field(cpu_worker, field, chosen, bad):
    errors = errors_of(run_quantization="on", **{"precisions": ["fp32", "int8"], field: chosen})
    assert list(errors) == [field]
    assert f"{bad} is not one of the available choices" in errors[field][0]


def test_config_for_maps_the_quantization_fields(cpu_worker):
    from advisor.jobs.profile_config import config_for

    form = JobForm(
        form_data(
            run_quantization="on", precisions=["int8", "fp32"], quant_variants=["lm_head"],
            run_speculative="on",
        )
    )  # fmt: skip
    assert form.is_valid(), form.errors
    config = config_for(form.save(commit=False))
    assert config.experiments == ["quantization", "speculative"]
    assert (config.precisions, config.quant_variants) == (["fp32", "int8"], ["lm_head"])


def test_a_row_with_blank_precisions_leaves_the_default_to_the_library(cpu_worker):
    from advisor.jobs.profile_config import config_for

    config = config_for(Job(model_name="demo", run_quantization=True))
    assert config.experiments == ["quantization"]
    assert (config.precisions, config.quant_variants) == ([], [])


# Prefix caching and parallelism ----------------------------------------------------

CHAT = (
    b'{"messages": [{"role": "system", "content": "Be brief."}, '
    b'{"role": "user", "content": "Hi"}]}\n'
)


def upload(content: bytes, name: str = "prompts.txt") -> dict[str, SimpleUploadedFile]:
    return {"prompt_file": SimpleUploadedFile(name, content, content_type="text/plain")}


def file_errors(content: bytes, **changes: str) -> dict[str, list[str]]:
    form = JobForm(form_data(**changes), upload(content))
    assert not form.is_valid()
    return form.errors


def test_a_text_file_is_parsed_and_saved_with_the_job_and_turns_caching_on(cpu_worker):
    content = b"You are a helpful assistant. Question 1\n\nYou are a helpful assistant. Q2\r\n"
    form = JobForm(form_data(), upload(content))
    assert form.is_valid(), form.errors
    job = form.save()
    assert job.run_caching is True  # choosing a file asks for the experiment
    sample = PromptSample.objects.get(job=job)
    assert sample.prompts == ["You are a helpful assistant. Question 1",
                              "You are a helpful assistant. Q2"]  # fmt: skip
    assert (sample.prompt_count, sample.size_bytes, sample.filename) == (
        2, len(content), "prompts.txt",
    )  # fmt: skip
    assert sample.sha256 == hashlib.sha256(content).hexdigest()


def test_a_jsonl_file_with_prompts_and_chat_messages_is_parsed_like_the_cli(cpu_worker):
    content = b'{"prompt": "Translate: cat"}\n' + CHAT
    form = JobForm(form_data(run_caching="on"), upload(content, "chats.jsonl"))
    assert form.is_valid(), form.errors
    job = form.save()
    assert job.sample_prompts() == parse_prompt_sample(content)
    assert job.sample_prompts() == ["Translate: cat", "system: Be brief.\nuser: Hi"]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "The prompt file is empty"),
        (b"\n  \n", "The prompt file is empty"),
        (b"first\nsec\x00ond\n", "looks binary (a NUL byte on line 2)"),
        (b"caf\xe9\n", "not UTF-8 text (an invalid byte on line 1)"),
        (b'{"prompt": "ok"}\n{"prompt": \n', "Line 2: not valid JSON"),
        (b'{"prompt": "ok"}\n{"text": "no prompt"}\n', 'Line 2: expected a "prompt" string'),
        (b'{"messages": [{"role": "user", "content": 3}]}\n', "Line 1, message 1"),
    ],
)
def test_a_bad_prompt_file_is_an_error_on_its_field_that_names_the_problem(
    cpu_worker, content, words
):
    errors = file_errors(content, run_caching="on")
    assert list(errors) == ["prompt_file"]
    assert words in errors["prompt_file"][0]
    assert "choose it again" in errors["prompt_file"][0]
    assert not PromptSample.objects.exists()


def test_the_form_error_is_the_cli_parsers_message(cpu_worker):
    content = b'{"prompt": "ok"}\n[1, 2]\n'
    with pytest.raises(PromptSampleError) as raised:
        parse_prompt_sample(content)
    message = file_errors(content)["prompt_file"][0]
    assert message.startswith(str(raised.value)[0].upper() + str(raised.value)[1:])


class UnreadableUpload(SimpleUploadedFile):
    def read(self, *args: Any) -> bytes:
        raise AssertionError("an oversized upload must be refused before it is read")

    chunks = read


def test_an_oversized_file_is_refused_by_its_size_before_it_is_read(cpu_worker):
    big = UnreadableUpload("huge.txt", b"x\n")
    big.size = PROMPT_SAMPLE_MAX_BYTES + 1
    form = JobForm(form_data(), {"prompt_file": big})
    assert not form.is_valid()
    assert list(form.errors) == ["prompt_file"]
    assert "The prompt file is 16.0 MiB; the limit is 16.0 MiB" in form.errors["prompt_file"][0]


def test_too_many_prompts_are_refused_with_the_line_that_is_one_too_many(cpu_worker):
    content = b"p\n" * (PROMPT_SAMPLE_MAX_PROMPTS + 1)
    message = file_errors(content)["prompt_file"][0]
    assert f"more than {PROMPT_SAMPLE_MAX_PROMPTS:,} prompts" in message
    assert f"line {PROMPT_SAMPLE_MAX_PROMPTS + 1}" in message


def test_a_good_file_with_an_error_elsewhere_asks_to_choose_it_again(cpu_worker):
    form = JobForm(form_data(prompt_tokens="0"), upload(b"one\ntwo\n"))
    assert not form.is_valid() and list(form.errors) == ["prompt_tokens"]
    assert "prompts.txt was read (2 prompts)" in form.prompt_file_note
    assert "choose it again" in form.prompt_file_note


def test_no_file_means_no_sample_and_no_note(cpu_worker):
    form = JobForm(form_data(run_caching="on"))
    assert form.is_valid(), form.errors
    job = form.save()
    assert job.run_caching and job.sample_info() is None and job.sample_prompts() == []
    assert form.prompt_file_note == ""


def test_the_tp_measure_select_offers_default_off_and_2_4_8_processes(cpu_worker):
    field = JobForm()["tp_measure"]
    assert [value for value, _ in field.field.choices] == ["", "0", "2", "4", "8"]
    assert field.value() is None
    assert "gloo" in field.help_text and "CPU" in field.help_text


@pytest.mark.parametrize(("posted", "stored"), [("", None), ("0", 0), ("2", 2), ("8", 8)])
def test_tp_measure_is_stored_as_chosen_with_blank_for_the_librarys_default(
    cpu_worker, posted, stored
):
    form = JobForm(form_data(run_parallel="on", tp_measure=posted))
    assert form.is_valid(), form.errors
    job = form.save(commit=False)
    assert (job.run_parallel, job.tp_measure) == (True, stored)


@pytest.mark.parametrize("value", ["3", "16", "two"])
def test_an_unknown_tp_measure_is_refused_on_its_field(cpu_worker, value):
    errors = errors_of(run_parallel="on", tp_measure=value)
    assert list(errors) == ["tp_measure"]
    assert "not one of the available choices" in errors["tp_measure"][0]


def test_config_for_reads_the_sample_tp_measure_and_experiments_from_the_database(cpu_worker):
    from advisor.jobs.profile_config import config_for

    form = JobForm(
        form_data(run_parallel="on", tp_measure="2", run_quantization="on",
                  precisions=["fp32", "int8"]),
        upload(b'{"prompt": "a <b>"}\n' + CHAT, "s.jsonl"),
    )  # fmt: skip
    assert form.is_valid(), form.errors
    saved = form.save()
    job = Job.objects.get(pk=saved.pk)  # as the worker sees it: nothing cached
    config = config_for(job)
    assert config.experiments == ["quantization", "caching", "parallel"]
    assert config.prompt_sample == ["a <b>", "system: Be brief.\nuser: Hi"]
    assert config.tp_measure == 2
    assert ProfileConfig.from_dict(config.to_dict()).prompt_sample == config.prompt_sample


def test_config_for_an_unsaved_job_uses_the_sample_the_form_parsed(cpu_worker):
    from advisor.jobs.profile_config import config_for

    form = JobForm(form_data(), upload(b"one\ntwo\n"))
    assert form.is_valid(), form.errors
    config = config_for(form.save(commit=False))
    assert config.experiments == ["caching"] and config.prompt_sample == ["one", "two"]
    assert config.tp_measure is None


def test_a_sample_is_left_out_of_the_config_when_caching_is_off(cpu_worker):
    from advisor.jobs.profile_config import config_for

    job = Job.objects.create(model_name="demo", run_parallel=True, tp_measure=0)
    PromptSample.objects.create(job=job, prompts=["x"], prompt_count=1, size_bytes=2, sha256="0")
    config = config_for(job)
    assert config.experiments == ["parallel"]
    assert (config.prompt_sample, config.tp_measure) == ([], 0)
