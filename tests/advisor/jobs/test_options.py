"""Each declared option (`profiling.options`) reaches every surface unchanged: the
library's config and CLI, `submit_job`, the new-job form, the API's schema and the
job row. A new option is one declaration; these tests check it everywhere. Each
technique's switch (`profiling.techniques`) reaches the form, the API and the row too."""

from __future__ import annotations

import argparse

import pytest
from django.core.management import load_command_class

from advisor.jobs.forms import JobForm
from advisor.jobs.models import Job
from advisor.jobs.profile_config import experiments_for
from advisor.jobs.request import job_request
from advisor.jobs.stored_options import switches
from profiling.cli import build_parser
from profiling.cli_common import flag_arguments
from profiling.config import Hardware, ProfileConfig, Workload
from profiling.options import FLOAT, INT, INTS, NAMES, OPTIONS, Option
from profiling.techniques import experiment_names, switched

pytestmark = pytest.mark.django_db
DECLARED = list(OPTIONS.values())


def actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def library_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["profile"]


def submit_parser() -> argparse.ArgumentParser:
    return load_command_class("advisor.jobs", "submit_job").create_parser("manage.py", "submit_job")


def config_default(option: Option):
    owner = {"workload": Workload(), "hardware": Hardware()}.get(
        option.family, ProfileConfig(model="demo")
    )
    return getattr(owner, option.config_name)


@pytest.mark.parametrize("option", DECLARED, ids=lambda o: o.name)
def test_both_command_lines_take_the_option_with_its_flag_default_and_help(option):
    flag, expected = flag_arguments(option)
    for parser in (library_parser(), submit_parser()):
        action = actions(parser)[flag]
        assert action.dest == option.name
        assert action.default == expected.get("default", action.default)
        assert (option.off_help if option.negated_flag else option.help) in action.help


@pytest.mark.parametrize("option", DECLARED, ids=lambda o: o.name)
def test_the_form_field_has_the_options_label_help_and_range(option):
    field = JobForm().fields[option.name]
    assert (field.label, field.help_text) == (option.label, option.help)
    if option.kind in (INT, FLOAT):
        assert (field.min_value, field.max_value) == (option.low, option.high)
        assert field.required is not option.optional
    if option.kind == NAMES:
        assert [value for value, _ in field.choices] == list(option.choices)


@pytest.mark.parametrize("option", DECLARED, ids=lambda o: o.name)
def test_the_api_schema_describes_the_option(option):
    schema = job_request().model_json_schema()["properties"][option.name]
    assert schema["title"] == option.label and option.help in schema["description"]
    if option.kind in (INT, FLOAT):
        bounded = schema["anyOf"][0] if option.optional else schema
        assert (bounded["minimum"], bounded["maximum"]) == (option.low, option.high)


@pytest.mark.parametrize("option", DECLARED, ids=lambda o: o.name)
def test_the_library_and_the_job_row_default_to_the_declared_value(option):
    default = config_default(option)
    if option.kind in (INTS, NAMES):
        assert default == list(option.default)
    elif option.name == "draft_model":
        assert default is None and option.default == ""  # blank: the family's default draft
    else:
        assert default == option.default
    row = Job(model_name="demo")
    assert row.options == {}  # nothing stored: each option reads its declaration
    stored = getattr(row, option.name)
    if option.kind in (INTS, NAMES):
        assert stored == list(option.default)
    else:
        assert stored == option.default


def test_the_row_keeps_its_options_as_one_json_value_in_the_librarys_types():
    job = Job.objects.create(
        model_name="demo", prompt_tokens=300, spec_ks=(2, 4), precisions=["fp32", "int8"],
        run_speculative=True, ttft_ms=250.0,
    )  # fmt: skip
    stored = Job.objects.values_list("options", flat=True).get(pk=job.pk)
    assert stored == {
        "prompt_tokens": 300, "spec_ks": [2, 4], "precisions": ["fp32", "int8"],
        "run_speculative": True, "ttft_ms": 250.0,
    }  # fmt: skip
    again = Job.objects.get(pk=job.pk)
    assert (again.prompt_tokens, again.spec_ks, again.concurrency) == (300, [2, 4], 8)


@pytest.mark.parametrize(
    "options",
    [{"prompt_tokens": 0}, {"prompt_tokens": "512"}, {"spec_ks": "1,2"}, {"run_caching": 1},
     {"precisions": ["int3"]}, {"colour": "red"}, {"draft_model": 7}],
)  # fmt: skip
def test_a_row_with_options_the_declarations_refuse_is_never_stored(options):
    with pytest.raises(ValueError, match="job options"):
        Job.objects.create(model_name="demo", options=options)
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("name", "bad"),
    [("prompt_tokens", 0), ("concurrency", 5000), ("ttft_ms", 0.0), ("spec_ks", [0]),
     ("spec_ks", list(range(1, 10))), ("precisions", ["int3"]), ("tp_measure", 3)],
)  # fmt: skip
def test_a_bad_value_is_refused_by_the_declaration_and_the_library_in_its_words(name, bad):
    from profiling.config import ConfigError

    problem = OPTIONS[name].problem(bad)
    assert problem
    config = ProfileConfig(model="demo")
    owner = config.workload if OPTIONS[name].family == "workload" else config
    setattr(owner, OPTIONS[name].config_name, bad)
    with pytest.raises(ConfigError) as refused:
        config.validate()
    assert str(refused.value) == f"{name}: {problem}"


SWITCHED = list(switched())


def test_every_experiment_the_config_knows_has_a_switch_in_the_registry():
    assert sorted(t.name for t in SWITCHED) == sorted(experiment_names())
    assert {f"run_{t.name}": t.name for t in SWITCHED} == switches()


@pytest.mark.parametrize("technique", SWITCHED, ids=lambda t: t.name)
def test_each_techniques_switch_reaches_the_form_the_api_and_the_row(technique):
    assert technique.switch is not None
    field = JobForm().fields[technique.switch_name]
    assert (field.label, field.help_text) == (technique.switch.label, technique.switch.help)
    assert field.required is False and field.initial is None
    schema = job_request().model_json_schema()["properties"][technique.switch_name]
    assert (schema["type"], schema["default"]) == ("boolean", False)
    assert schema["description"] == technique.switch.label
    job = Job(model_name="demo")
    assert getattr(job, technique.switch_name) is False  # stored, off by default
    setattr(job, technique.switch_name, True)
    assert experiments_for(job) == [technique.name]
